"""The representable magnitudes of float16 and bfloat16 (and float32), taken from numpy / ml_dtypes ``finfo``."""

import dataclasses
import math

import ml_dtypes
import numpy as np
import tensorflow as tf

from slim_mp.precision import PrecisionLike, resolve_precision

# Histogram bins are whole powers of two: bin i holds |x| in [2**(LOG2_LOW + i), 2**(LOG2_LOW + i + 1)).
# float32's smallest subnormal is 2**-149 and its largest value is below 2**128, so every finite non-zero
# float32 lands in bins 1..; bin 0 receives the zeros (log2(0) = -inf is clamped there) and is dropped.
LOG2_LOW = -150
LOG2_HIGH = 130
HISTOGRAM_BINS = LOG2_HIGH - LOG2_LOW


@dataclasses.dataclass(frozen=True)
class TypeLimits:
    """A float type's largest finite magnitude and its smallest non-zero (subnormal) magnitude.

    A float32 value above ``max_finite`` overflows to inf when cast; a non-zero one below
    ``min_subnormal`` flushes to zero (ignoring round-to-nearest at the very edges).
    """

    name: str
    max_finite: float
    min_subnormal: float

    @property
    def log2_min_subnormal(self) -> int:
        """log2 of ``min_subnormal`` (a whole power of two for every IEEE-style type)."""
        return int(round(math.log2(self.min_subnormal)))


def type_limits(precision: PrecisionLike) -> TypeLimits:
    """Limits of ``float16``/``bfloat16`` (or ``float32``) from ``finfo``: e.g. float16 65504 and 2**-24."""
    dtype = resolve_precision(precision, allow_float32=True)
    numpy_type = {tf.float16: np.float16, tf.float32: np.float32}.get(dtype)
    info = np.finfo(numpy_type) if numpy_type is not None else ml_dtypes.finfo(ml_dtypes.bfloat16)
    return TypeLimits(dtype.name, float(info.max), float(info.smallest_subnormal))
