"""The fully-convolutional classifier head shared by AlexNet v2, OverFeat and VGG.

These networks turn their fully connected layers into convolutions (``fc6``, ``fc7``, ``fc8``), so
they run on inputs larger than their training size and then produce a map of logits. After
``fc7`` they share the same tail: optional global average pooling, ``dropout7`` and the 1x1
``fc8`` classifier (omitted when ``num_classes`` is 0 or None, which returns the ``fc7``
features), squeezed to ``[batch, num_classes]`` with ``spatial_squeeze``.
"""

from typing import Optional

import tensorflow as tf
import tf_slim as slim


def conv_net_arg_scope(
    weight_decay: float, biases_initializer, max_pool_padding: Optional[str] = None
) -> dict:
    """ReLU, ``biases_initializer`` and L2 ``weight_decay`` on every layer; 'SAME' convolutions.

    ``max_pool_padding`` (if given) becomes the max pools' default padding.
    """
    with slim.arg_scope(
        [slim.conv2d, slim.fully_connected],
        activation_fn=tf.nn.relu,
        biases_initializer=biases_initializer,
        weights_regularizer=slim.l2_regularizer(weight_decay),
    ), slim.arg_scope([slim.conv2d], padding="SAME") as scope:
        if max_pool_padding is None:
            return scope
        with slim.arg_scope([slim.max_pool2d], padding=max_pool_padding) as pool_scope:
            return pool_scope


def classifier_tail(
    net: tf.Tensor,
    end_points_collection: str,
    scope_name: str,
    num_classes: Optional[int],
    is_training: bool,
    dropout_keep_prob: float,
    spatial_squeeze: bool,
    global_pool: bool,
    **fc8_options,
) -> tuple:
    """Finish a network whose ``fc7`` output is ``net``; return ``(net, end_points)``.

    The end points are those collected in ``end_points_collection`` so far, plus ``global_pool``
    and ``<scope_name>/fc8`` (the squeezed logits when ``spatial_squeeze``). ``fc8_options`` are
    extra ``slim.conv2d`` arguments of ``fc8`` (e.g. its biases initializer).
    """
    end_points = slim.utils.convert_collection_to_dict(end_points_collection)
    if global_pool:
        net = tf.reduce_mean(net, [1, 2], keepdims=True, name="global_pool")
        end_points["global_pool"] = net
    if not num_classes:
        return net, end_points
    net = slim.dropout(net, dropout_keep_prob, is_training=is_training, scope="dropout7")
    net = slim.conv2d(net, num_classes, [1, 1], activation_fn=None, normalizer_fn=None, scope="fc8", **fc8_options)
    if spatial_squeeze:
        net = tf.squeeze(net, [1, 2], name="fc8/squeezed")
    end_points[scope_name + "/fc8"] = net
    return net, end_points
