"""VGG configurations A, D and E (Simonyan & Zisserman 2014) (official module ``nets.vgg``).

``vgg_a`` (11 layers), ``vgg_16`` (= ``vgg_d``) and ``vgg_19`` (= ``vgg_e``): stages of 3x3
convolutions ``conv<i>/conv<i>_<j>`` each followed by a 2x2 max pool ``pool<i>``, then fully
connected layers written as convolutions (``fc6`` 7x7, ``fc7`` and ``fc8`` 1x1). At 224x224 the
logits are ``[batch, num_classes]``; larger inputs give a map of logits with
``spatial_squeeze=False``, or one vector with ``global_pool=True``.
"""

from typing import Optional, Sequence

import tensorflow as tf
import tf_slim as slim

from nets._impl.conv_classifier import classifier_tail, conv_net_arg_scope

STAGE_DEPTHS = (64, 128, 256, 512, 512)
CONVS_PER_STAGE = {
    "vgg_a": (1, 1, 2, 2, 2),
    "vgg_16": (2, 2, 3, 3, 3),
    "vgg_19": (2, 2, 4, 4, 4),
}


def vgg_arg_scope(weight_decay: float = 0.0005) -> dict:
    """ReLU, zero biases and L2 decay on every layer; 'SAME' convolutions."""
    return conv_net_arg_scope(weight_decay, tf.compat.v1.zeros_initializer())


def _vgg(
    inputs: tf.Tensor,
    convs_per_stage: Sequence[int],
    num_classes: Optional[int],
    is_training: bool,
    dropout_keep_prob: float,
    spatial_squeeze: bool,
    reuse: Optional[bool],
    scope: str,
    default_scope: str,
    fc_conv_padding: str,
    global_pool: bool,
) -> tuple:
    """Build the VGG with ``convs_per_stage`` 3x3 convolutions per stage; see :func:`vgg_16`."""
    with tf.compat.v1.variable_scope(scope, default_scope, [inputs], reuse=reuse) as net_scope:
        collection = net_scope.original_name_scope + "_end_points"
        with slim.arg_scope([slim.conv2d, slim.fully_connected, slim.max_pool2d], outputs_collections=collection):
            net = inputs
            for stage, (depth, convs) in enumerate(zip(STAGE_DEPTHS, convs_per_stage), start=1):
                net = slim.repeat(net, convs, slim.conv2d, depth, [3, 3], scope=f"conv{stage}")
                net = slim.max_pool2d(net, [2, 2], scope=f"pool{stage}")
            net = slim.conv2d(net, 4096, [7, 7], padding=fc_conv_padding, scope="fc6")
            net = slim.dropout(net, dropout_keep_prob, is_training=is_training, scope="dropout6")
            net = slim.conv2d(net, 4096, [1, 1], scope="fc7")
            return classifier_tail(
                net, collection, net_scope.name, num_classes, is_training, dropout_keep_prob, spatial_squeeze,
                global_pool,
            )


def vgg_a(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1000,
    is_training: bool = True,
    dropout_keep_prob: float = 0.5,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "vgg_a",
    fc_conv_padding: str = "VALID",
    global_pool: bool = False,
) -> tuple:
    """VGG-11 (configuration A). Arguments and result as :func:`vgg_16`."""
    return _vgg(inputs, CONVS_PER_STAGE["vgg_a"], num_classes, is_training, dropout_keep_prob, spatial_squeeze,
                reuse, scope, "vgg_a", fc_conv_padding, global_pool)


def vgg_16(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1000,
    is_training: bool = True,
    dropout_keep_prob: float = 0.5,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "vgg_16",
    fc_conv_padding: str = "VALID",
    global_pool: bool = False,
) -> tuple:
    """VGG-16 (configuration D).

    Args:
        inputs: [batch, height, width, channels], 224x224 for classification.
        num_classes: logits width; 0 or None returns the ``fc7`` features (no ``fc8``).
        is_training: whether dropout is active.
        dropout_keep_prob: keep probability of ``dropout6``/``dropout7``.
        spatial_squeeze: squeeze the 1x1 spatial dimensions of the logits.
        reuse: reuse the variables of ``scope``.
        scope: variable scope.
        fc_conv_padding: padding of ``fc6``; 'SAME' keeps ``fc6``..``fc8`` at pool5's resolution.
        global_pool: average ``fc7`` over space before the classifier (any input size).

    Returns:
        ``(net, end_points)``: logits (or features) and the layer outputs by name.
    """
    return _vgg(inputs, CONVS_PER_STAGE["vgg_16"], num_classes, is_training, dropout_keep_prob, spatial_squeeze,
                reuse, scope, "vgg_16", fc_conv_padding, global_pool)


def vgg_19(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1000,
    is_training: bool = True,
    dropout_keep_prob: float = 0.5,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "vgg_19",
    fc_conv_padding: str = "VALID",
    global_pool: bool = False,
) -> tuple:
    """VGG-19 (configuration E). Arguments and result as :func:`vgg_16`."""
    return _vgg(inputs, CONVS_PER_STAGE["vgg_19"], num_classes, is_training, dropout_keep_prob, spatial_squeeze,
                reuse, scope, "vgg_19", fc_conv_padding, global_pool)


vgg_a.default_image_size = 224
vgg_16.default_image_size = 224
vgg_19.default_image_size = 224

# The paper's names of the two deeper configurations.
vgg_d = vgg_16
vgg_e = vgg_19
