"""Parse and describe the precision a user asks for: the one validator of precision names."""

import difflib
from typing import Union

import tensorflow as tf

PrecisionLike = Union[str, tf.DType]

# Every spelling accepted, with the dtype it means; the first name per dtype is the canonical one.
_ALIASES = {
    "float32": tf.float32,
    "fp32": tf.float32,
    "float16": tf.float16,
    "fp16": tf.float16,
    "half": tf.float16,
    "bfloat16": tf.bfloat16,
    "bf16": tf.bfloat16,
}
LOW_PRECISIONS = (tf.float16, tf.bfloat16)

SHORT_NAMES = {tf.float16: "fp16", tf.bfloat16: "bf16", tf.float32: "fp32"}


def resolve_precision(precision: PrecisionLike, allow_float32: bool = False) -> tf.DType:
    """Return the dtype a precision name (or ``tf.DType``) means.

    Args:
      precision: ``float16``/``fp16``/``half``, ``bfloat16``/``bf16`` (and, with ``allow_float32``,
        ``float32``/``fp32``), any case, or the ``tf.DType`` itself.
      allow_float32: accept float32 (for options where "no mixed precision" is a valid answer).

    Returns:
      ``tf.float16``, ``tf.bfloat16`` or (only with ``allow_float32``) ``tf.float32``.

    Raises:
      ValueError: for any other value, naming the accepted ones and the closest match.
    """
    accepted = LOW_PRECISIONS + ((tf.float32,) if allow_float32 else ())
    choices = "'float32', 'float16' or 'bfloat16'" if allow_float32 else "'float16' or 'bfloat16'"
    dtype = precision if isinstance(precision, tf.DType) else _ALIASES.get(str(precision).lower())
    if dtype in accepted:
        return dtype
    if dtype is not None:
        shown = dtype.name if isinstance(precision, tf.DType) else precision
        raise ValueError(f"{shown!r} is not a mixed precision; use {choices}.")
    names = [name for name, alias_dtype in _ALIASES.items() if alias_dtype in accepted]
    close = difflib.get_close_matches(str(precision).lower(), names, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"Unknown precision {precision!r}; use {choices}.{hint}")


def precision_name(precision: PrecisionLike, allow_float32: bool = False) -> str:
    """The canonical name (``float32``, ``float16``, ``bfloat16``) of what ``resolve_precision`` accepts."""
    return resolve_precision(precision, allow_float32).name


def short_name(dtype: tf.DType) -> str:
    """``fp16``/``bf16``/``fp32``: the tag used in the names of ops and casts the pass creates."""
    return SHORT_NAMES[dtype]
