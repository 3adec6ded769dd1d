"""Parse and describe the low-precision dtype a user asks for."""

import difflib
from typing import Union

import tensorflow as tf

PrecisionLike = Union[str, tf.DType]

_ALIASES = {
    "float16": tf.float16,
    "fp16": tf.float16,
    "half": tf.float16,
    "bfloat16": tf.bfloat16,
    "bf16": tf.bfloat16,
}

SHORT_NAMES = {tf.float16: "fp16", tf.bfloat16: "bf16", tf.float32: "fp32"}


def resolve_precision(precision: PrecisionLike) -> tf.DType:
    """Return ``tf.float16`` or ``tf.bfloat16`` for a name or ``tf.DType``; anything else is a ValueError."""
    if isinstance(precision, tf.DType):
        if precision in (tf.float16, tf.bfloat16):
            return precision
        raise ValueError(
            f"precision={precision.name!r} is not a low-precision type; use 'float16' or 'bfloat16'."
        )
    if isinstance(precision, str) and precision.lower() in _ALIASES:
        return _ALIASES[precision.lower()]
    close = difflib.get_close_matches(str(precision).lower(), list(_ALIASES), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"Unknown precision {precision!r}; use 'float16' or 'bfloat16'.{hint}")


def short_name(dtype: tf.DType) -> str:
    """``fp16``/``bf16``/``fp32``: the tag used in the names of ops and casts the pass creates."""
    return SHORT_NAMES[dtype]
