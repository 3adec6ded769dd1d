"""What the value audit recommends: the scopes to keep float32, and the loss scales that fit the gradients.

``overflowing_scopes`` grows the set of scopes whose activations would overflow until no op left
in low precision reads an overflowing tensor (checked on the graph pass's plan). ``scale_range``
reads the gradients' log2 histogram: the smallest power of two that lifts them out of the flush
zone, the largest that keeps the largest one finite, and an initial scale between.

Leaves alone: measuring the ranges (``value_stats``, ``value_audit``).
"""

import dataclasses
import math
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from slim_mp.graph_pass import RewriteOptions, RewritePlan, plan_rewrite
from slim_mp.numerics.limits import LOG2_HIGH, LOG2_LOW, TypeLimits
from slim_mp.numerics.value_stats import OpRange

# The lower end of the recommended loss-scale range leaves at most this share of the non-zero
# gradient elements flushing to zero (a long tail of near-zero gradients does not count against it).
FLUSHED_SHARE_ALLOWED = 0.01
MAX_SCOPE_ROUNDS = 20


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


def op_scope(op_name: str) -> str:
    """The name scope an op lives in (``net/fc1/MatMul`` -> ``net/fc1``); a top-level op is its own scope."""
    return op_name.rsplit("/", 1)[0] if "/" in op_name else op_name


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


def _low_inputs(plan: RewritePlan, op: tf.Operation) -> List[tf.Tensor]:
    """The inputs a low op reads in low precision (cast down when their producer stays float32)."""
    carries = plan.decisions[op].ports.data_inputs
    return [t for t, data in zip(op.inputs, carries) if data]


def overflowing_scopes(fetches: Any, plan: RewritePlan, activations: Sequence[OpRange],
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
