"""Tell whether gradients hold inf or NaN, as data rather than control flow.

``LossScaleOptimizer`` skips a step when any gradient is non-finite. The check
is one ``is_finite`` test and one ``reduce_all`` per gradient, stacked into a
single flag vector: no ``tf.cond`` per variable, and the vector doubles as the
per-variable report the divergence guard needs.

In a cluster each gradient's test runs on the task that made the gradient (``beside``): a gradient
made beside its update on a parameter server (the graph pass's ``wire_side``) is not sent to the
worker to be tested, one flag is.
"""

import contextlib
from typing import ContextManager, List, Optional, Sequence, Tuple, Union

import tensorflow as tf

Gradient = Union[tf.Tensor, tf.IndexedSlices]
GradsAndVars = List[Tuple[Optional[Gradient], tf.Variable]]


def gradient_values(gradient: Gradient) -> tf.Tensor:
    """Return the numbers a gradient carries: the ``values`` of an IndexedSlices, else the tensor."""
    if isinstance(gradient, tf.IndexedSlices):
        return gradient.values
    return gradient


def beside(gradient: Gradient) -> ContextManager:
    """Create ops on the task that made ``gradient`` when its producer is placed on a cluster's task (a device
    naming a job); elsewhere (a single process) where the enclosing scopes put them."""
    device = gradient_values(gradient).op.device
    return tf.device(device) if tf.DeviceSpec.from_string(device).job is not None else contextlib.nullcontext()


def _all_finite(gradient: Gradient) -> tf.Tensor:
    with beside(gradient):
        return tf.reduce_all(tf.math.is_finite(gradient_values(gradient)))


def finite_flags(gradients: Sequence[Gradient]) -> tf.Tensor:
    """Return a bool vector with one entry per gradient, True where it holds no inf or NaN."""
    if not gradients:
        raise ValueError("gradients must not be empty; pass at least one gradient tensor.")
    with tf.name_scope("finite_flags"):
        return tf.stack([_all_finite(g) for g in gradients])
