"""The arg_scope shared by Inception v1-v4 (official ``nets/inception_utils.py``).

Use it around any of them::

    with slim.arg_scope(inception_utils.inception_arg_scope()):
        logits, end_points = inception.inception_v3(images, num_classes, is_training=True)
"""

from typing import Callable, Optional

import tensorflow as tf
import tf_slim as slim

from nets._impl import inception_parts


def inception_arg_scope(
    weight_decay: float = 0.00004,
    use_batch_norm: bool = True,
    batch_norm_decay: float = 0.9997,
    batch_norm_epsilon: float = 0.001,
    activation_fn: Optional[Callable[[tf.Tensor], tf.Tensor]] = tf.nn.relu,
    batch_norm_updates_collections: Optional[str] = tf.compat.v1.GraphKeys.UPDATE_OPS,
    batch_norm_scale: bool = False,
) -> dict:
    """Official Inception defaults: L2 on conv and FC weights, He-style init, batch norm after each conv.

    Args:
        weight_decay: L2 regularization strength for conv and fully connected weights.
        use_batch_norm: whether each convolution is followed by batch norm (else it has biases).
        batch_norm_decay: decay of the batch-norm moving averages.
        batch_norm_epsilon: added to the variance to avoid division by zero.
        activation_fn: activation after each convolution.
        batch_norm_updates_collections: collection of the moving-average update ops.
        batch_norm_scale: whether batch norm learns a scale (``gamma``); the official checkpoints have none.

    Returns:
        An arg_scope for ``slim.arg_scope``.
    """
    if use_batch_norm:
        normalizer_fn = slim.batch_norm
        normalizer_params = inception_parts.batch_norm_params(
            batch_norm_decay, batch_norm_epsilon, batch_norm_updates_collections, batch_norm_scale
        )
    else:
        normalizer_fn, normalizer_params = None, {}
    with slim.arg_scope(
        [slim.conv2d, slim.fully_connected], weights_regularizer=slim.l2_regularizer(weight_decay)
    ), slim.arg_scope(
        [slim.conv2d],
        weights_initializer=slim.variance_scaling_initializer(),
        activation_fn=activation_fn,
        normalizer_fn=normalizer_fn,
        normalizer_params=normalizer_params,
    ) as scope:
        return scope
