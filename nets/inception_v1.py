"""Inception v1 / GoogLeNet (Szegedy et al. 2014, "Going deeper with convolutions") with batch norm,
with the official TF-Slim names (``nets/inception_v1.py``).

The trunk is the layer table of ``nets/_impl/inception_v1_layers.py`` built with
2-D layers: a 7x7/2 stem, nine four-branch Inception blocks and max poolings,
224x224 -> 7x7x1024 (``Mixed_5c``).
"""

import functools
from typing import Callable, Optional

import tensorflow as tf
import tf_slim as slim

from nets import inception_utils
from nets._impl import inception_parts
from nets._impl.initializers import trunc_normal
from nets._impl.inception_v1_layers import (
    INCEPTION_V1_LAYERS,
    ROOT_BLOCK,
    Layer,
    MaxPool,
    MixedDepths,
    PointwiseConv,
    StemConv,
)


# The official checkpoint names the second convolution of Mixed_5b's Branch_2 "0a", not "0b".
_SECOND_CONV_SCOPE_EXCEPTIONS = {"Mixed_5b": "Conv2d_0a_3x3"}

_HEAD = inception_parts.HeadLayout(
    pool_size=7,
    pool_stride=1,
    pool_end_point="AvgPool_0a_7x7",
    pool_scope="AvgPool_0a_7x7",
    dropout_scope="Dropout_0b",
    logits_scope="Conv2d_0c_1x1",
    records_pre_logits=False,
    predictions_under_logits=True,
)


def _inception_block(net: tf.Tensor, depths: MixedDepths, scope: str) -> tf.Tensor:
    """Four branches: 1x1 | 1x1 > 3x3 | 1x1 > 3x3 | 3x3 max pool > 1x1, concatenated on channels."""
    with tf.compat.v1.variable_scope(scope):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = slim.conv2d(net, depths.branch_0, [1, 1], scope="Conv2d_0a_1x1")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = slim.conv2d(net, depths.branch_1_reduce, [1, 1], scope="Conv2d_0a_1x1")
            branch_1 = slim.conv2d(branch_1, depths.branch_1, [3, 3], scope="Conv2d_0b_3x3")
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = slim.conv2d(net, depths.branch_2_reduce, [1, 1], scope="Conv2d_0a_1x1")
            second_scope = _SECOND_CONV_SCOPE_EXCEPTIONS.get(scope, "Conv2d_0b_3x3")
            branch_2 = slim.conv2d(branch_2, depths.branch_2, [3, 3], scope=second_scope)
        with tf.compat.v1.variable_scope("Branch_3"):
            branch_3 = slim.max_pool2d(net, [3, 3], scope="MaxPool_0a_3x3")
            branch_3 = slim.conv2d(branch_3, depths.branch_3, [1, 1], scope="Conv2d_0b_1x1")
        return inception_parts.concat_branches([branch_0, branch_1, branch_2, branch_3])


def _build_layer(net: tf.Tensor, scope: str, layer: Layer) -> tf.Tensor:
    """One entry of the Inception v1 table as a 2-D layer."""
    if isinstance(layer, StemConv):
        return slim.conv2d(net, layer.depth, [7, 7], stride=2, scope=scope)
    if isinstance(layer, MaxPool):
        return slim.max_pool2d(net, list(layer.kernel[1:]), stride=list(layer.stride[1:]), scope=scope)
    if isinstance(layer, PointwiseConv):
        return slim.conv2d(net, layer.depth, [1, 1], scope=scope)
    if isinstance(layer, MixedDepths):
        return _inception_block(net, layer, scope)
    return slim.conv2d(net, layer.depth, [3, 3], scope=scope)


def inception_v1_base(
    inputs: tf.Tensor,
    final_endpoint: str = "Mixed_5c",
    include_root_block: bool = True,
    scope: str = "InceptionV1",
) -> tuple:
    """Build the Inception v1 trunk up to ``final_endpoint``.

    Args:
        inputs: a [batch, height, width, channels] image tensor.
        final_endpoint: the last end point built (``Conv2d_1a_7x7`` ... ``Mixed_5c``).
        include_root_block: False leaves out the stem (``Conv2d_1a_7x7`` .. ``MaxPool_3a_3x3``), so
            ``inputs`` feeds ``Mixed_3b`` directly (e.g. a 28x28x192 feature map).
        scope: variable scope.

    Returns:
        ``(net, end_points)``: the ``final_endpoint`` tensor and every end point built.

    Raises:
        ValueError: if ``final_endpoint`` is not an end point of the trunk built.
    """
    layers = [
        (name, functools.partial(_build_layer, layer=layer))
        for name, layer in INCEPTION_V1_LAYERS
        if include_root_block or name not in ROOT_BLOCK
    ]
    end_points = {}
    with tf.compat.v1.variable_scope(scope, "InceptionV1", [inputs]):
        with slim.arg_scope([slim.conv2d, slim.fully_connected], weights_initializer=trunc_normal(0.01)):
            with slim.arg_scope([slim.conv2d, slim.max_pool2d], stride=1, padding="SAME"):
                net = inception_parts.run_layers(inputs, layers, final_endpoint, end_points)
    return net, end_points


def inception_v1(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1000,
    is_training: bool = True,
    dropout_keep_prob: float = 0.8,
    prediction_fn: Callable = slim.softmax,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "InceptionV1",
    global_pool: bool = False,
) -> tuple:
    """Inception v1 classifier; returns ``(logits, end_points)``.

    Args:
        inputs: a [batch, height, width, 3] image tensor (default size 224).
        num_classes: number of classes; 0 or None returns the pooled features (``AvgPool_0a_7x7``).
        is_training: training mode of batch norm and dropout.
        dropout_keep_prob: fraction of activations kept by dropout.
        prediction_fn: turns logits into ``end_points['Predictions']``.
        spatial_squeeze: False keeps the logits [batch, 1, 1, classes].
        reuse: reuse the variables of an earlier build under ``scope``.
        scope: variable scope.
        global_pool: average over the whole feature map instead of a 7x7 window (any input size).
    """
    options = inception_parts.HeadOptions(num_classes, dropout_keep_prob, prediction_fn, spatial_squeeze, global_pool)
    with tf.compat.v1.variable_scope(scope, "InceptionV1", [inputs], reuse=reuse) as net_scope:
        with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
            features, end_points = inception_v1_base(inputs, scope=net_scope)
            return inception_parts.classification_head(features, end_points, _HEAD, options)


inception_v1.default_image_size = 224

inception_v1_arg_scope = inception_utils.inception_arg_scope
