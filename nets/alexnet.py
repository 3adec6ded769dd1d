"""AlexNet v2, the "One weird trick" variant (Krizhevsky 2014) without LRN (official module ``nets.alexnet``).

The fully connected layers are convolutions: at 224x224 the logits are ``[batch, num_classes]``;
larger inputs give a map of logits with ``spatial_squeeze=False``, or one vector with
``global_pool=True``. Use it under ``alexnet_v2_arg_scope()`` for the official defaults.
"""

from typing import Optional

import tensorflow as tf
import tf_slim as slim

from nets._impl.conv_classifier import classifier_tail, conv_net_arg_scope
from nets._impl.initializers import trunc_normal

__all__ = ["alexnet_v2", "alexnet_v2_arg_scope", "trunc_normal"]


def alexnet_v2_arg_scope(weight_decay: float = 0.0005) -> dict:
    """ReLU, 0.1 biases and L2 decay on every layer; 'SAME' convolutions, 'VALID' max pooling."""
    return conv_net_arg_scope(weight_decay, tf.compat.v1.constant_initializer(0.1), max_pool_padding="VALID")


def alexnet_v2(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1000,
    is_training: bool = True,
    dropout_keep_prob: float = 0.5,
    spatial_squeeze: bool = True,
    scope: str = "alexnet_v2",
    global_pool: bool = False,
) -> tuple:
    """AlexNet v2 (http://arxiv.org/abs/1404.5997).

    Args:
        inputs: [batch, height, width, channels], 224x224 for classification.
        num_classes: logits width; 0 or None returns the ``fc7`` features (no ``fc8``).
        is_training: whether dropout is active.
        dropout_keep_prob: keep probability of ``dropout6``/``dropout7``.
        spatial_squeeze: squeeze the 1x1 spatial dimensions of the logits.
        scope: variable scope.
        global_pool: average ``fc7`` over space before the classifier (any input size).

    Returns:
        ``(net, end_points)``: logits (or features) and the layer outputs by name.
    """
    with tf.compat.v1.variable_scope(scope, "alexnet_v2", [inputs]) as net_scope:
        collection = net_scope.original_name_scope + "_end_points"
        with slim.arg_scope([slim.conv2d, slim.fully_connected, slim.max_pool2d], outputs_collections=[collection]):
            net = slim.conv2d(inputs, 64, [11, 11], 4, padding="VALID", scope="conv1")
            net = slim.max_pool2d(net, [3, 3], 2, scope="pool1")
            net = slim.conv2d(net, 192, [5, 5], scope="conv2")
            net = slim.max_pool2d(net, [3, 3], 2, scope="pool2")
            net = slim.conv2d(net, 384, [3, 3], scope="conv3")
            net = slim.conv2d(net, 384, [3, 3], scope="conv4")
            net = slim.conv2d(net, 256, [3, 3], scope="conv5")
            net = slim.max_pool2d(net, [3, 3], 2, scope="pool5")
            with slim.arg_scope(
                [slim.conv2d],
                weights_initializer=trunc_normal(0.005),
                biases_initializer=tf.compat.v1.constant_initializer(0.1),
            ):
                net = slim.conv2d(net, 4096, [5, 5], padding="VALID", scope="fc6")
                net = slim.dropout(net, dropout_keep_prob, is_training=is_training, scope="dropout6")
                net = slim.conv2d(net, 4096, [1, 1], scope="fc7")
                return classifier_tail(
                    net, collection, net_scope.name, num_classes, is_training, dropout_keep_prob,
                    spatial_squeeze, global_pool, biases_initializer=tf.compat.v1.zeros_initializer(),
                )


alexnet_v2.default_image_size = 224
