"""Inception v2 / BN-Inception (Ioffe & Szegedy 2015) with the official TF-Slim names (``nets/inception_v2.py``).

Layout: a separable 7x7/2 stem (``Conv2d_1a_7x7``) .. ``MaxPool_3a_3x3`` takes
224x224 to 28x28x192; Inception blocks with two stacked 3x3 convolutions
(``Mixed_3b/3c``, ``4b..4e``, ``5b/5c``) and two grid reductions (``Mixed_4a``,
``Mixed_5a``) end at 7x7x1024.
"""

import functools
from dataclasses import dataclass
from typing import Callable, Optional, Union

import tensorflow as tf
import tf_slim as slim

from nets import inception_utils
from nets._impl import inception_parts
from nets._impl.initializers import trunc_normal


# Initializer scales of the official definition: the 1x1 reductions before 3x3s, the pooled projections.
_REDUCE_STDDEV = 0.09
_PROJECTION_STDDEV = 0.1
DATA_FORMATS = ("NHWC", "NCHW")


@dataclass(frozen=True)
class _Block:
    """A four-branch block: 1x1 | 1x1 > 3x3 | 1x1 > 3x3 > 3x3 | 3x3 ``pool`` > 1x1."""

    branch_0: int
    branch_1_reduce: int
    branch_1: int
    branch_2_reduce: int
    branch_2: int
    pool: str
    branch_3: int


@dataclass(frozen=True)
class _Reduction:
    """A stride-2 block: 1x1 > 3x3/2 | 1x1 > 3x3 > 3x3/2 | 3x3/2 max pool."""

    branch_0_reduce: int
    branch_0: int
    branch_1_reduce: int
    branch_1: int


_BLOCKS = (
    ("Mixed_3b", _Block(64, 64, 64, 64, 96, "avg", 32)),
    ("Mixed_3c", _Block(64, 64, 96, 64, 96, "avg", 64)),
    ("Mixed_4a", _Reduction(128, 160, 64, 96)),
    ("Mixed_4b", _Block(224, 64, 96, 96, 128, "avg", 128)),
    ("Mixed_4c", _Block(192, 96, 128, 96, 128, "avg", 128)),
    ("Mixed_4d", _Block(160, 128, 160, 128, 160, "avg", 96)),
    ("Mixed_4e", _Block(96, 128, 192, 160, 192, "avg", 96)),
    ("Mixed_5a", _Reduction(128, 192, 192, 256)),
    ("Mixed_5b", _Block(352, 192, 320, 160, 224, "avg", 128)),
    ("Mixed_5c", _Block(352, 192, 320, 192, 224, "max", 128)),
)

_HEAD = inception_parts.HeadLayout(
    pool_size=7,
    pool_stride=2,
    pool_end_point="AvgPool_1a",
    pool_scope="AvgPool_1a_{}x{}",
    dropout_scope="Dropout_1b",
    logits_scope="Conv2d_1c_1x1",
    records_pre_logits=True,
    predictions_under_logits=False,
)


def _reduce(net: tf.Tensor, depth: int, scope: str = "Conv2d_0a_1x1") -> tf.Tensor:
    """The 1x1 reduction at the head of a branch."""
    return slim.conv2d(net, depth, [1, 1], weights_initializer=trunc_normal(_REDUCE_STDDEV), scope=scope)


def _block(net: tf.Tensor, scope: str, spec: _Block, depth: Callable[[int], int], axis: int) -> tf.Tensor:
    """A four-branch Inception block; branches are joined on channel ``axis``."""
    with tf.compat.v1.variable_scope(scope):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = slim.conv2d(net, depth(spec.branch_0), [1, 1], scope="Conv2d_0a_1x1")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = _reduce(net, depth(spec.branch_1_reduce))
            branch_1 = slim.conv2d(branch_1, depth(spec.branch_1), [3, 3], scope="Conv2d_0b_3x3")
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = _reduce(net, depth(spec.branch_2_reduce))
            branch_2 = slim.conv2d(branch_2, depth(spec.branch_2), [3, 3], scope="Conv2d_0b_3x3")
            branch_2 = slim.conv2d(branch_2, depth(spec.branch_2), [3, 3], scope="Conv2d_0c_3x3")
        with tf.compat.v1.variable_scope("Branch_3"):
            if spec.pool == "max":
                branch_3 = slim.max_pool2d(net, [3, 3], scope="MaxPool_0a_3x3")
            else:
                branch_3 = slim.avg_pool2d(net, [3, 3], scope="AvgPool_0a_3x3")
            branch_3 = slim.conv2d(
                branch_3,
                depth(spec.branch_3),
                [1, 1],
                weights_initializer=trunc_normal(_PROJECTION_STDDEV),
                scope="Conv2d_0b_1x1",
            )
        return inception_parts.concat_branches([branch_0, branch_1, branch_2, branch_3], axis)


def _reduction(net: tf.Tensor, scope: str, spec: _Reduction, depth: Callable[[int], int], axis: int) -> tf.Tensor:
    """A grid-halving block; branches are joined on channel ``axis``."""
    with tf.compat.v1.variable_scope(scope):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = _reduce(net, depth(spec.branch_0_reduce))
            branch_0 = slim.conv2d(branch_0, depth(spec.branch_0), [3, 3], stride=2, scope="Conv2d_1a_3x3")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = _reduce(net, depth(spec.branch_1_reduce))
            branch_1 = slim.conv2d(branch_1, depth(spec.branch_1), [3, 3], scope="Conv2d_0b_3x3")
            branch_1 = slim.conv2d(branch_1, depth(spec.branch_1), [3, 3], stride=2, scope="Conv2d_1a_3x3")
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = slim.max_pool2d(net, [3, 3], stride=2, scope="MaxPool_1a_3x3")
        return inception_parts.concat_branches([branch_0, branch_1, branch_2], axis)


def _stem_conv(net: tf.Tensor, scope: str, depth: Callable[[int], int], use_separable_conv: bool) -> tf.Tensor:
    """``Conv2d_1a_7x7``: separable (at most 8 depthwise channels per input channel) or a plain 7x7/2 conv."""
    if not use_separable_conv:
        return slim.conv2d(net, depth(64), [7, 7], stride=2, weights_initializer=trunc_normal(1.0), scope=scope)
    depthwise_multiplier = min(int(depth(64) / 3), 8)
    return slim.separable_conv2d(
        net,
        depth(64),
        [7, 7],
        depth_multiplier=depthwise_multiplier,
        stride=2,
        padding="SAME",
        weights_initializer=trunc_normal(1.0),
        scope=scope,
    )


def _layers(depth: Callable[[int], int], use_separable_conv: bool, axis: int, include_root_block: bool) -> list:
    """The ``(end_point, layer_fn)`` sequence of the trunk."""
    max_pool = functools.partial(slim.max_pool2d, kernel_size=[3, 3], stride=2)
    root = [
        ("Conv2d_1a_7x7", functools.partial(_stem_conv, depth=depth, use_separable_conv=use_separable_conv)),
        ("MaxPool_2a_3x3", max_pool),
        (
            "Conv2d_2b_1x1",
            functools.partial(
                slim.conv2d, num_outputs=depth(64), kernel_size=[1, 1], weights_initializer=trunc_normal(0.1)
            ),
        ),
        ("Conv2d_2c_3x3", functools.partial(slim.conv2d, num_outputs=depth(192), kernel_size=[3, 3])),
        ("MaxPool_3a_3x3", max_pool),
    ]

    def block_layer(spec: Union[_Block, _Reduction]) -> inception_parts.LayerFn:
        build = _block if isinstance(spec, _Block) else _reduction
        return functools.partial(build, spec=spec, depth=depth, axis=axis)

    blocks = [(name, block_layer(spec)) for name, spec in _BLOCKS]
    return root + blocks if include_root_block else blocks


def inception_v2_base(
    inputs: tf.Tensor,
    final_endpoint: str = "Mixed_5c",
    min_depth: int = 16,
    depth_multiplier: float = 1.0,
    use_separable_conv: bool = True,
    data_format: str = "NHWC",
    include_root_block: bool = True,
    scope: Optional[str] = None,
) -> tuple:
    """Build the Inception v2 trunk up to ``final_endpoint``.

    Args:
        inputs: a [batch, height, width, channels] tensor ([batch, channels, height, width] for NCHW).
        final_endpoint: the last end point built (``Conv2d_1a_7x7`` ... ``Mixed_5c``).
        min_depth: smallest number of channels of any convolution when ``depth_multiplier`` < 1.
        depth_multiplier: scales the channels of every convolution; must be positive.
        use_separable_conv: False makes ``Conv2d_1a_7x7`` a plain convolution (needed for NCHW).
        data_format: ``NHWC`` or ``NCHW``.
        include_root_block: False leaves out the stem (``Conv2d_1a_7x7`` .. ``MaxPool_3a_3x3``).
        scope: variable scope (default ``InceptionV2``).

    Returns:
        ``(net, end_points)``: the ``final_endpoint`` tensor and every end point built.

    Raises:
        ValueError: on an unknown ``final_endpoint`` or ``data_format``, ``depth_multiplier`` <= 0,
            or NCHW together with the separable stem.
    """
    depth = inception_parts.depth_function(depth_multiplier, min_depth)
    if data_format not in DATA_FORMATS:
        raise ValueError(f"data_format={data_format!r} must be one of {DATA_FORMATS}.")
    if data_format == "NCHW" and use_separable_conv:
        raise ValueError(
            "data_format='NCHW' needs use_separable_conv=False: the separable stem supports only NHWC."
        )
    layers = _layers(depth, use_separable_conv, data_format.index("C"), include_root_block)
    end_points = {}
    with tf.compat.v1.variable_scope(scope, "InceptionV2", [inputs]):
        with slim.arg_scope(
            [slim.conv2d, slim.max_pool2d, slim.avg_pool2d], stride=1, padding="SAME", data_format=data_format
        ):
            net = inception_parts.run_layers(inputs, layers, final_endpoint, end_points)
    return net, end_points


def inception_v2(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1000,
    is_training: bool = True,
    dropout_keep_prob: float = 0.8,
    min_depth: int = 16,
    depth_multiplier: float = 1.0,
    prediction_fn: Callable = slim.softmax,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "InceptionV2",
    global_pool: bool = False,
) -> tuple:
    """Inception v2 classifier; returns ``(logits, end_points)``.

    Args:
        inputs: a [batch, height, width, 3] image tensor (default size 224).
        num_classes: number of classes; 0 or None returns the pooled features (``AvgPool_1a``).
        is_training: training mode of batch norm and dropout.
        dropout_keep_prob: fraction of activations kept by dropout.
        min_depth: smallest number of channels when ``depth_multiplier`` < 1.
        depth_multiplier: scales the channels of every convolution; must be positive.
        prediction_fn: turns logits into ``end_points['Predictions']``.
        spatial_squeeze: False keeps the logits [batch, 1, 1, classes].
        reuse: reuse the variables of an earlier build under ``scope``.
        scope: variable scope.
        global_pool: average over the whole feature map instead of a 7x7 window (any input size).

    Raises:
        ValueError: if ``depth_multiplier`` <= 0.
    """
    inception_parts.depth_function(depth_multiplier, min_depth)
    options = inception_parts.HeadOptions(num_classes, dropout_keep_prob, prediction_fn, spatial_squeeze, global_pool)
    with tf.compat.v1.variable_scope(scope, "InceptionV2", [inputs], reuse=reuse) as net_scope:
        with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
            features, end_points = inception_v2_base(
                inputs, scope=net_scope, min_depth=min_depth, depth_multiplier=depth_multiplier
            )
            return inception_parts.classification_head(features, end_points, _HEAD, options)


inception_v2.default_image_size = 224

inception_v2_arg_scope = inception_utils.inception_arg_scope
