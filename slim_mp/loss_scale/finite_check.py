"""Tell whether gradients hold inf or NaN, as data rather than control flow.

``LossScaleOptimizer`` skips a step when any gradient is non-finite. The check
is one ``is_finite`` test and one ``reduce_all`` per gradient, stacked into a
single flag vector: no ``tf.cond`` per variable, and the vector doubles as the
per-variable report the divergence guard needs.
"""

from typing import List, Optional, Sequence, Tuple, Union

import tensorflow as tf

Gradient = Union[tf.Tensor, tf.IndexedSlices]
GradsAndVars = List[Tuple[Optional[Gradient], tf.Variable]]


def gradient_values(gradient: Gradient) -> tf.Tensor:
    """Return the numbers a gradient carries: the ``values`` of an IndexedSlices, else the tensor."""
    if isinstance(gradient, tf.IndexedSlices):
        return gradient.values
    return gradient


def finite_flags(gradients: Sequence[Gradient]) -> tf.Tensor:
    """Return a bool vector with one entry per gradient, True where it holds no inf or NaN."""
    if not gradients:
        raise ValueError("gradients must not be empty; pass at least one gradient tensor.")
    with tf.name_scope("finite_flags"):
        return tf.stack([tf.reduce_all(tf.math.is_finite(gradient_values(g))) for g in gradients])
