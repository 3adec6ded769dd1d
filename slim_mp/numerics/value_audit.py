"""Value-range audit: what float16/bfloat16 would face, measured on the float32 graph before any rewrite.

For every op the graph pass would lower, and for the gradient of the loss flowing back into each of
them, a few real batches give: the largest magnitude, the smallest non-zero magnitude, and the
fractions of elements that would overflow (above the type's largest finite value) or flush to zero
(below its smallest subnormal). From these follow the scopes to keep in float32 (their activations
would overflow) and the range of loss scales that keeps the observed gradients representable.

This module runs the audit and reports it (``audit``, ``AuditResult``, ``audit_markdown``); the
stat ops are ``value_stats``'s and the recommendation ``audit_advice``'s.
"""

import dataclasses
import math
from typing import Any, Dict, List, Optional

import numpy as np
import tensorflow as tf

from slim_mp.markdown_table import markdown_table
from slim_mp.graph_pass import RewriteOptions, RewritePlan, plan_rewrite, rewrite_options_from
from slim_mp.loss_scale import gradient_values
from slim_mp.numerics.audit_advice import Recommendation, overflowing_scopes, scale_range
from slim_mp.numerics.limits import HISTOGRAM_BINS, TypeLimits, type_limits
from slim_mp.numerics.step_feeds import Feeds, step_feeds
from slim_mp.numerics.value_stats import (ACTIVATION, GRADIENT, OpRange, build_stats_fetch, combine_stats,
                                          op_ranges)
from slim_mp.precision import PrecisionLike, resolve_precision


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
        scales = self.recommendation.loss_scale_range
        recommendation["loss_scale_range"] = None if scales is None else list(scales)
        return {
            "precision": self.precision,
            "ops": [dataclasses.asdict(op) for op in self.ops],
            "recommendation": recommendation,
        }

    def ops_of(self, kind: str) -> List[OpRange]:
        """The rows of one kind (``activation`` or ``gradient``), in network order."""
        return [op for op in self.ops if op.kind == kind]


def _low_outputs(plan: RewritePlan, op: tf.Operation) -> List[tf.Tensor]:
    """The float32 outputs the pass would turn low (batch norm's statistics, for one, stay float32)."""
    carries = plan.decisions[op].ports.data_outputs
    return [t for t, data in zip(op.outputs, carries) if data and t.dtype.base_dtype == tf.float32]


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
        activations = build_stats_fetch([t for _, t in outputs], [op for op, _ in outputs], limits)
        gradient_pairs = []
        if loss is not None:
            gradients = tf.gradients(loss, [t for _, t in outputs])
            gradient_pairs = [(op, gradient_values(g)) for (op, _), g in zip(outputs, gradients) if g is not None]
        gradients_probe = build_stats_fetch([g for _, g in gradient_pairs], [op for op, _ in gradient_pairs], limits)
    probes = {ACTIVATION: activations, GRADIENT: gradients_probe}
    fetch = {kind: {"stats": p.stats, "histogram": p.histogram} for kind, p in probes.items() if p.ops}
    totals: Dict[str, Optional[np.ndarray]] = {kind: None for kind in fetch}
    histograms = {kind: np.zeros((len(p.ops), HISTOGRAM_BINS), np.int64) for kind, p in probes.items()}
    for step in range(batches.steps):
        values = session.run(fetch, feed_dict=batches.feed(step))
        for kind, value in values.items():
            totals[kind] = value["stats"] if totals[kind] is None else combine_stats(totals[kind], value["stats"])
            histograms[kind] += value["histogram"]
    rows = {kind: op_ranges(probes[kind].ops, totals[kind], kind) if kind in totals else [] for kind in probes}
    overflowing = {t.name for (_, t), row in zip(outputs, totals[ACTIVATION]) if row[0] > limits.max_finite}
    keep, kept_plan = overflowing_scopes(fetches, plan, rows[ACTIVATION], overflowing, options)
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
        lines += ["", f"## {title} ({len(chosen)} of {len(result.ops_of(kind))})", ""]
        lines += markdown_table(
            ("op", "type", "max abs", "min non-zero abs", "overflow", "underflow"),
            ((op.name, op.type, f"{op.max_abs:.4g}", "-" if op.min_nonzero_abs is None else f"{op.min_nonzero_abs:.3g}",
              f"{op.frac_overflow:.2%}", f"{op.frac_underflow:.2%}") for op in chosen))
    return "\n".join(lines) + "\n"
