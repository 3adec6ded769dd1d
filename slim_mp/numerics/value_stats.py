"""In-graph range statistics for the value audit: per tensor its largest and smallest magnitudes,
the elements a low-precision type would overflow or flush to zero, and a log2 histogram.

``build_stats_fetch`` adds the stat ops for a list of tensors; ``combine_stats`` merges the rows
of several batches (or of several tensors of one op), and ``op_ranges`` turns the merged rows
into one ``OpRange`` per op.

Leaves alone: which tensors are audited and what the ranges recommend (``value_audit``,
``audit_advice``).
"""

import dataclasses
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from slim_mp.numerics.limits import HISTOGRAM_BINS, LOG2_HIGH, LOG2_LOW, TypeLimits

ACTIVATION, GRADIENT = "activation", "gradient"


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
class StatsFetch:
    """The stats fetched for one kind: one row (and one log2 histogram) per tensor, and the op of each row."""

    ops: List[tf.Operation]
    stats: Optional[tf.Tensor]
    histogram: Optional[tf.Tensor]


def build_stats_fetch(tensors: Sequence[tf.Tensor], owners: Sequence[tf.Operation], limits: TypeLimits
                      ) -> StatsFetch:
    """Add the stat ops of ``tensors`` (``owners[i]`` is the op ``tensors[i]`` belongs to) to their graph."""
    if not tensors:
        return StatsFetch([], None, None)
    rows, histograms = zip(*(_tensor_stats(t, limits) for t in tensors))
    return StatsFetch(list(owners), tf.stack(rows), tf.stack(list(histograms)))


def combine_stats(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Merge stats rows (``[..., 5]``): max of maxima, min of minima, summed counts and sizes."""
    return np.concatenate([np.maximum(first[..., :1], second[..., :1]), np.minimum(first[..., 1:2], second[..., 1:2]),
                           first[..., 2:] + second[..., 2:]], axis=-1)


def op_ranges(owners: Sequence[tf.Operation], totals: np.ndarray, kind: str) -> List[OpRange]:
    """One row per op (its tensors' stats combined), in the order the ops first appear."""
    combined: Dict[tf.Operation, np.ndarray] = {}
    for op, row in zip(owners, totals):
        combined[op] = combine_stats(combined[op], row) if op in combined else row.copy()
    result = []
    for op, (max_abs, min_nonzero, overflow, underflow, size) in combined.items():
        result.append(OpRange(
            name=op.name, type=op.type, kind=kind, max_abs=float(max_abs),
            min_nonzero_abs=None if math.isinf(min_nonzero) else float(min_nonzero),
            frac_overflow=float(overflow / size) if size else 0.0,
            frac_underflow=float(underflow / size) if size else 0.0,
        ))
    return result
