"""Value-range audit: what float16/bfloat16 would face, measured on the float32 graph before any rewrite.

For every op the graph pass would lower, and for the gradient of the loss flowing back into each of
them, a few real batches give: the largest magnitude, the smallest non-zero magnitude, and the
fractions of elements that would overflow (above the type's largest finite value) or flush to zero
(below its smallest subnormal). From these follow the scopes to keep in float32 (their activations
would overflow) and the range of loss scales that keeps the observed gradients representable.
"""

import dataclasses
import math
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from slim_mp.graph_pass import RewriteOptions, RewritePlan, plan_rewrite, rewrite_options_from
from slim_mp.loss_scale import gradient_values
from slim_mp.numerics.limits import HISTOGRAM_BINS, LOG2_HIGH, LOG2_LOW, TypeLimits, type_limits
from slim_mp.numerics.step_feeds import Feeds, step_feeds
from slim_mp.precision import PrecisionLike, resolve_precision

ACTIVATION, GRADIENT = "activation", "gradient"
# The lower end of the recommended loss-scale range leaves at most this share of the non-zero
# gradient elements flushing to zero (a long tail of near-zero gradients does not count against it).
FLUSHED_SHARE_ALLOWED = 0.01
MAX_SCOPE_ROUNDS = 20


@dataclasses.dataclass(frozen=True)
class OpRange:
    """The magnitudes one op's float outputs (``activation``) or their loss gradients (``gradient``) reached."""

    name: str
    type: str
    kind: str
    max_abs: float
    min_nonzero_abs: Optional[float]
    frac_overflow: float
    frac_underflow: float


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """Scopes to keep float32, and loss scales (powers of two) that keep the observed gradients representable.

    The scale range considers the gradients of the ops that stay low once those scopes are kept.

    ``initial_loss_scale`` is None when no gradient would flush to zero unscaled (no scaling needed);
    ``loss_scale_range`` is None when no gradient was audited. When ``loss_scale_range[0] >
    loss_scale_range[1]`` no single scale both lifts the small gradients and keeps the largest finite.
    """

    keep_fp32_scopes: Tuple[str, ...]
    initial_loss_scale: Optional[float]
    loss_scale_range: Optional[Tuple[float, float]]


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """Per-op ranges, the recommendation, and log2-magnitude histograms (bin i: |x| in [2**(LOG2_LOW+i), ..))."""

    precision: str
    steps: int
    limits: TypeLimits
    ops: List[OpRange]
    recommendation: Recommendation
    activation_histogram: np.ndarray
    gradient_histogram: np.ndarray

    def to_dict(self) -> Dict[str, Any]:
        """The JSON layout: ``{"precision", "ops": [...], "recommendation": {...}}``."""
        recommendation = dataclasses.asdict(self.recommendation)
        recommendation["keep_fp32_scopes"] = list(self.recommendation.keep_fp32_scopes)
        scale_range = self.recommendation.loss_scale_range
        recommendation["loss_scale_range"] = None if scale_range is None else list(scale_range)
        return {
            "precision": self.precision,
            "ops": [dataclasses.asdict(op) for op in self.ops],
            "recommendation": recommendation,
        }

    def ops_of(self, kind: str) -> List[OpRange]:
        """The rows of one kind (``activation`` or ``gradient``), in network order."""
        return [op for op in self.ops if op.kind == kind]


def op_scope(op_name: str) -> str:
    """The name scope an op lives in (``net/fc1/MatMul`` -> ``net/fc1``); a top-level op is its own scope."""
    return op_name.rsplit("/", 1)[0] if "/" in op_name else op_name


def _log2_bins(magnitude: tf.Tensor) -> tf.Tensor:
    """floor(log2 |x|) of float32 magnitudes, exactly, from the exponent bits (subnormals rescaled first)."""
    subnormal = magnitude < 2.0 ** -126
    scaled = tf.where(subnormal, magnitude * 2.0 ** 64, magnitude)
    exponent = tf.bitwise.bitwise_and(tf.bitwise.right_shift(tf.bitcast(scaled, tf.int32), 23), 255)
    return exponent - 127 - tf.where(subnormal, 64, 0)


def _tensor_stats(tensor: tf.Tensor, limits: TypeLimits) -> Tuple[tf.Tensor, tf.Tensor]:
    """In-graph stats row ``[max_abs, min_nonzero_abs, n_overflow, n_underflow, size]`` and log2 histogram."""
    magnitude = tf.abs(tf.cast(tf.reshape(tensor, [-1]), tf.float32))
    nonzero = magnitude > 0
    counted = tf.float64
    stats = tf.stack([
        tf.cast(tf.reduce_max(magnitude), counted),
        tf.cast(tf.reduce_min(tf.where(nonzero, magnitude, math.inf)), counted),
        tf.reduce_sum(tf.cast(magnitude > limits.max_finite, counted)),
        tf.reduce_sum(tf.cast(tf.logical_and(nonzero, magnitude < limits.min_subnormal), counted)),
        tf.cast(tf.size(magnitude), counted),
    ])
    bins = tf.cast(_log2_bins(magnitude), tf.float32) + 0.5  # zeros land below the range, in bin 0
    histogram = tf.histogram_fixed_width(
        tf.reshape(bins, [-1]), [float(LOG2_LOW), float(LOG2_HIGH)], nbins=HISTOGRAM_BINS, dtype=tf.int64
    )
    return stats, histogram


@dataclasses.dataclass
class _Probe:
    """The stats fetched for one kind: one row (and one log2 histogram) per tensor, and the op of each row."""

    ops: List[tf.Operation]
    stats: Optional[tf.Tensor]
    histogram: Optional[tf.Tensor]


def _build_probe(tensors: Sequence[tf.Tensor], owners: Sequence[tf.Operation], limits: TypeLimits) -> _Probe:
    if not tensors:
        return _Probe([], None, None)
    rows, histograms = zip(*(_tensor_stats(t, limits) for t in tensors))
    return _Probe(list(owners), tf.stack(rows), tf.stack(list(histograms)))


def _low_outputs(plan: RewritePlan, op: tf.Operation) -> List[tf.Tensor]:
    """The float32 outputs the pass would turn low (batch norm's statistics, for one, stay float32)."""
    carries = plan.decisions[op].ports.data_outputs
    return [t for t, data in zip(op.outputs, carries) if data and t.dtype.base_dtype == tf.float32]


def _low_inputs(plan: RewritePlan, op: tf.Operation) -> List[tf.Tensor]:
    """The inputs a low op reads in low precision (cast down when their producer stays float32)."""
    carries = plan.decisions[op].ports.data_inputs
    return [t for t, data in zip(op.inputs, carries) if data]


def _aggregate(owners: Sequence[tf.Operation], totals: np.ndarray, kind: str) -> List[OpRange]:
    """One row per op (its tensors' stats combined), in the order the ops first appear."""
    combined: Dict[tf.Operation, np.ndarray] = {}
    for op, row in zip(owners, totals):
        combined[op] = _combine(combined[op], row) if op in combined else row.copy()
    result = []
    for op, (max_abs, min_nonzero, overflow, underflow, size) in combined.items():
        result.append(OpRange(
            name=op.name, type=op.type, kind=kind, max_abs=float(max_abs),
            min_nonzero_abs=None if math.isinf(min_nonzero) else float(min_nonzero),
            frac_overflow=float(overflow / size) if size else 0.0,
            frac_underflow=float(underflow / size) if size else 0.0,
        ))
    return result


def _combine(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Merge stats rows (``[..., 5]``): max of maxima, min of minima, summed counts and sizes."""
    return np.concatenate([np.maximum(first[..., :1], second[..., :1]), np.minimum(first[..., 1:2], second[..., 1:2]),
                           first[..., 2:] + second[..., 2:]], axis=-1)


def scale_range(gradient_histogram: np.ndarray, max_gradient: float, limits: TypeLimits
                ) -> Tuple[Optional[float], Optional[Tuple[float, float]]]:
    """``(initial scale, (lo, hi))`` from the gradients' log2 histogram and largest magnitude.

    ``lo`` is the smallest power of two >= 1 that leaves at most ``FLUSHED_SHARE_ALLOWED`` of the
    non-zero elements flushing to zero; ``hi`` the largest power of two keeping ``max_gradient`` at or below
    the type's largest finite value; the initial scale is the power of two halfway between (in log2).
    """
    if max_gradient <= 0 or not math.isfinite(max_gradient):
        return None, None
    counts = np.asarray(gradient_histogram, dtype=np.float64).copy()
    counts[0] = 0  # zeros
    exponents = np.arange(LOG2_LOW, LOG2_HIGH)

    def flushed(shift: int) -> float:
        return float(counts[exponents + shift < limits.log2_min_subnormal].sum())

    unscaled = flushed(0)
    allowed = FLUSHED_SHARE_ALLOWED * counts.sum()
    hi_exponent = math.floor(math.log2(limits.max_finite / max_gradient))
    lo_exponent = 0
    while flushed(lo_exponent) > allowed:
        lo_exponent += 1
    initial = None
    if unscaled:
        initial = 2.0 ** ((lo_exponent + hi_exponent) // 2 if lo_exponent <= hi_exponent else hi_exponent)
    return initial, (2.0 ** lo_exponent, 2.0 ** hi_exponent)


def _overflowing_scopes(fetches: Any, plan: RewritePlan, activations: List[OpRange],
                        overflowing_tensors: Iterable[str], options: RewriteOptions
                        ) -> Tuple[Tuple[str, ...], RewritePlan]:
    """Scopes whose ops would overflow, grown until no op left low-precision reads an overflowing tensor.

    Keeping an overflowing layer float32 moves the overflow to the cast into the next low op, so
    the consumer's scope joins too (checked on the pass's plan with the scopes kept). Returns the
    scopes and the plan that keeps them.
    """
    overflowing = set(overflowing_tensors)
    scopes = {op_scope(row.name) for row in activations if row.frac_overflow > 0}
    if not scopes:
        return (), plan
    for _ in range(MAX_SCOPE_ROUNDS):
        kept = dataclasses.replace(options, keep_fp32_scopes=options.keep_fp32_scopes + tuple(sorted(scopes)))
        plan = plan_rewrite(fetches, plan.dtype, kept)
        low = set(plan.low_ops)
        added = {op_scope(op.name) for op in plan.low_ops
                 if any(t.name in overflowing and t.op not in low for t in _low_inputs(plan, op))} - scopes
        if not added:
            break
        scopes |= added
    return tuple(sorted(scopes)), plan


def _single_scalar_loss(fetches: Any) -> Optional[tf.Tensor]:
    flat = tf.nest.flatten(fetches)
    if len(flat) == 1 and isinstance(flat[0], tf.Tensor) and flat[0].dtype.is_floating and flat[0].shape.rank == 0:
        return flat[0]
    return None


def audit(
    fetches: Any,
    precision: PrecisionLike,
    session: tf.compat.v1.Session,
    feeds: Feeds = None,
    *,
    loss: Optional[tf.Tensor] = None,
    steps: Optional[int] = None,
    options: Optional[RewriteOptions] = None,
    **option_keywords: Any,
) -> AuditResult:
    """Measure, on the float32 graph, the values the ops ``slim_mp.rewrite(fetches, precision)`` would lower reach.

    The ops audited are those of the static painting (``placement="static"``), whatever the placement
    option says: a what-if of ranges, the same on every device and under any load.
    Run it on a float32 graph whose variables are initialised in ``session``; it adds stat ops
    (and the gradients of ``loss``) to that graph, so audit a graph you will not rewrite afterwards.
    Each of the ``steps`` runs evaluates one batch at the current weights (nothing is trained).

    Args:
      fetches: what the pass would be given (usually the total loss).
      precision: ``float16`` or ``bfloat16``: the type whose limits are checked.
      session: a session of the graph, variables initialised.
      feeds: a feed dict for every step, a sequence of feed dicts (one per step), a function
        ``step -> feed dict``, or None (an input pipeline in the graph supplies each batch).
      loss: the scalar whose gradients are audited; defaults to ``fetches`` when that is one scalar.
        Without a loss only activations are audited.
      steps: batches to run (>= 1); None for one per feed dict of a sequence, else 5.
      options: the graph pass's ``RewriteOptions``; None for the defaults. Its ``placement`` is ignored.
      **option_keywords: options of ``slim_mp.rewrite`` (``keep_fp32_scopes``, ``deny``, ...),
        replacing those of ``options``; a ``placement`` among them is ignored.

    Returns:
      The per-op ranges, the recommendation and the histograms.

    Raises:
      ValueError: for a bad precision, ``steps`` or rewrite option, ``steps`` other than the length
        of a sequence of feed dicts, or a graph with nothing to lower.
      TypeError: for a keyword that is no rewrite option, or ``feeds`` of none of the forms above.
    """
    dtype = resolve_precision(precision)
    batches = step_feeds(feeds, steps, default_steps=5)
    limits = type_limits(dtype)
    # What the static painting would lower, whatever the placement: timing decides speed, not which
    # values a precision can hold, and an audit must not depend on this machine's load or device.
    options = dataclasses.replace(rewrite_options_from(options, option_keywords, "audit"), placement="static")
    plan = plan_rewrite(fetches, dtype, options)
    if not plan.low_ops:
        raise ValueError(f"the pass would lower no op of these fetches to {dtype.name}; nothing to audit.")
    loss = loss if loss is not None else _single_scalar_loss(fetches)
    outputs = [(op, t) for op in plan.low_ops for t in _low_outputs(plan, op)]
    graph = plan.region.graph
    with graph.as_default(), tf.name_scope("value_audit"):
        activations = _build_probe([t for _, t in outputs], [op for op, _ in outputs], limits)
        gradient_pairs = []
        if loss is not None:
            gradients = tf.gradients(loss, [t for _, t in outputs])
            gradient_pairs = [(op, gradient_values(g)) for (op, _), g in zip(outputs, gradients) if g is not None]
        gradients_probe = _build_probe([g for _, g in gradient_pairs], [op for op, _ in gradient_pairs], limits)
    probes = {ACTIVATION: activations, GRADIENT: gradients_probe}
    fetch = {kind: {"stats": p.stats, "histogram": p.histogram} for kind, p in probes.items() if p.ops}
    totals: Dict[str, Optional[np.ndarray]] = {kind: None for kind in fetch}
    histograms = {kind: np.zeros((len(p.ops), HISTOGRAM_BINS), np.int64) for kind, p in probes.items()}
    for step in range(batches.steps):
        values = session.run(fetch, feed_dict=batches.feed(step))
        for kind, value in values.items():
            totals[kind] = value["stats"] if totals[kind] is None else _combine(totals[kind], value["stats"])
            histograms[kind] += value["histogram"]
    rows = {kind: _aggregate(probes[kind].ops, totals[kind], kind) if kind in totals else [] for kind in probes}
    overflowing = {t.name for (_, t), row in zip(outputs, totals[ACTIVATION]) if row[0] > limits.max_finite}
    keep, kept_plan = _overflowing_scopes(fetches, plan, rows[ACTIVATION], overflowing, options)
    # The loss scale serves the gradients of the ops that stay low once the scopes are kept float32.
    still_low = set(kept_plan.low_ops)
    scaled = np.array([op in still_low for op in probes[GRADIENT].ops], bool)
    max_gradient = float(totals[GRADIENT][scaled, 0].max()) if GRADIENT in totals and scaled.any() else 0.0
    initial, scales = scale_range(histograms[GRADIENT][scaled].sum(axis=0), max_gradient, limits)
    return AuditResult(
        precision=dtype.name, steps=batches.steps, limits=limits, ops=rows[ACTIVATION] + rows[GRADIENT],
        recommendation=Recommendation(keep, initial, scales),
        activation_histogram=histograms[ACTIVATION].sum(axis=0), gradient_histogram=histograms[GRADIENT].sum(axis=0),
    )


def audit_markdown(result: AuditResult, rows_shown: int = 10) -> str:
    """A short report: the recommendation, then the riskiest activations and gradients (all in the JSON)."""
    rec = result.recommendation
    limits = result.limits
    lines = [
        f"# Value-range audit for {result.precision} ({result.steps} float32 steps)",
        "",
        f"{result.precision}: largest finite {limits.max_finite:.6g}, smallest subnormal {limits.min_subnormal:.3g}.",
        "",
        f"- keep float32: {', '.join(rec.keep_fp32_scopes) or '(nothing overflows)'}",
    ]
    if rec.loss_scale_range is None:
        lines.append("- loss scale: no gradients audited")
    else:
        lo, hi = rec.loss_scale_range
        initial = "none needed" if rec.initial_loss_scale is None else f"{rec.initial_loss_scale:g}"
        lines.append(f"- loss scale: initial {initial}, range [{lo:g}, {hi:g}]"
                     + (" (empty: the largest gradients overflow at the scale that lifts the small ones)"
                        if lo > hi else ""))
    for kind, key, title in (
        (ACTIVATION, lambda op: (op.frac_overflow, op.max_abs), "activations, largest first"),
        (GRADIENT, lambda op: (op.frac_underflow, -(op.min_nonzero_abs or math.inf)),
         "activation gradients, most flushed to zero first"),
    ):
        chosen = sorted(result.ops_of(kind), key=key, reverse=True)[:rows_shown]
        lines += ["", f"## {title} ({len(chosen)} of {len(result.ops_of(kind))})", "",
                  "| op | type | max abs | min non-zero abs | overflow | underflow |", "|---|---|---|---|---|---|"]
        for op in chosen:
            smallest = "-" if op.min_nonzero_abs is None else f"{op.min_nonzero_abs:.3g}"
            lines.append(f"| {op.name} | {op.type} | {op.max_abs:.4g} | {smallest} | "
                         f"{op.frac_overflow:.2%} | {op.frac_underflow:.2%} |")
    return "\n".join(lines) + "\n"
