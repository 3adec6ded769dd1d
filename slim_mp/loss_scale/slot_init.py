"""Optimizer slots that start on buffers of their own, not on a constant the session keeps.

A ``tf.compat.v1`` optimizer creates its slots (Momentum's accumulators, Adam's moments, RMSProp's
``rms``) from constant initialisers: zeros, ones, a scalar. Grappler folds each into a ``Const``
(one per shape, shared by every slot of that shape) that the session's cached executor of the
initialisation run holds; the slots start on that buffer and their first update copies it, so
one more buffer per slot shape stays alive for the whole session (about 115 MiB for ResNet-50's
Momentum, in every precision). Inside ``unfolded_slot_initializers`` such slots start from
``Empty(init=True)`` instead, zero-filled at run time, which grappler does not fold (another value
``v`` as ``v - Empty``), so each slot owns its buffer and is updated in place. Exact for every
value: ``v - (+0) == v``, -0 and NaN included, and +0 never goes through the subtraction, which
grappler would turn into a negation (-0). Slot names, shapes and dtypes are unchanged, so
checkpoints are too.

Example::

    with unfolded_slot_initializers():
        train_op = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
"""

import contextlib
from typing import Any, Callable, Iterator, Optional

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1


def _scalar_value(initializer: Any) -> Optional[float]:
    """The one value a zeros, ones or scalar-constant initialiser fills with; None for any other initialiser."""
    if isinstance(initializer, tf1.zeros_initializer):
        return 0
    if isinstance(initializer, tf1.ones_initializer):
        return 1
    if isinstance(initializer, tf1.constant_initializer) and np.ndim(initializer.value) == 0:
        return initializer.value
    return None


def _filled_at_run_time(value: float) -> Callable[..., tf.Tensor]:
    """An initialiser giving ``value`` everywhere, computed by ops grappler cannot fold into a constant."""
    def initializer(shape, dtype=tf.float32, partition_info=None) -> tf.Tensor:
        del partition_info  # the shape is already the partition's
        dtype = tf.as_dtype(dtype).base_dtype
        zeros = tf.raw_ops.Empty(shape=shape, dtype=dtype, init=True)
        if value == 0 and not np.signbit(value):
            return zeros
        return tf.subtract(tf.constant(value, dtype), zeros)
    return initializer


def _unfolded_getter(getter: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A custom getter: a non-trainable variable with a scalar-valued initialiser gets the run-time fill."""
    value = _scalar_value(kwargs.get("initializer"))
    if value is not None and kwargs.get("trainable") is False:
        kwargs["initializer"] = _filled_at_run_time(value)
    return getter(*args, **kwargs)


@contextlib.contextmanager
def unfolded_slot_initializers() -> Iterator[None]:
    """Create the optimizer slots made in this block from run-time fills (same scope, names and values)."""
    with tf1.variable_scope(tf1.get_variable_scope(), custom_getter=_unfolded_getter, auxiliary_name_scope=False):
        yield
