"""Inception v1, v2 and v3 on tf_slim's trunks, with the official TF-Slim classification heads.

The trunks (``inception_v*_base``) come from tf_slim and already create the
official variables. The heads are written here because the official ones do
more than tf_slim's: they record the pooled features (``AvgPool_0a_7x7`` for
v1, ``AvgPool_1a`` for v2/v3) and ``PreLogits``, accept ``global_pool``, and
return the pooled features when ``num_classes`` is 0 or None. The pooling
kernel shrinks to the feature map for inputs smaller than the default size.
"""

from dataclasses import dataclass
from typing import Callable, Optional

import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import inception as _slim_inception

inception_v1_base = _slim_inception.inception_v1_base
inception_v2_base = _slim_inception.inception_v2_base
inception_v3_base = _slim_inception.inception_v3_base
inception_v1_arg_scope = _slim_inception.inception_v1_arg_scope
inception_v2_arg_scope = _slim_inception.inception_v2_arg_scope
inception_v3_arg_scope = _slim_inception.inception_v3_arg_scope


@dataclass(frozen=True)
class _HeadLayout:
    """Layer and end-point names of one version's classification head (they differ between versions)."""

    pool_size: int
    pool_stride: int
    pool_end_point: str
    pool_scope: str
    dropout_scope: str
    logits_scope: str


_V1_HEAD = _HeadLayout(7, 1, "AvgPool_0a_7x7", "AvgPool_0a_7x7", "Dropout_0b", "Conv2d_0c_1x1")
_V2_HEAD = _HeadLayout(7, 2, "AvgPool_1a", "AvgPool_1a_{}x{}", "Dropout_1b", "Conv2d_1c_1x1")
_V3_HEAD = _HeadLayout(8, 2, "AvgPool_1a", "AvgPool_1a_{}x{}", "Dropout_1b", "Conv2d_1c_1x1")


def _fitted_kernel(features: tf.Tensor, size: int) -> list:
    """A ``size`` x ``size`` kernel, shrunk to the feature map when that is statically smaller."""
    height, width = features.shape.as_list()[1:3]
    return [min(size, height or size), min(size, width or size)]


@dataclass(frozen=True)
class _HeadOptions:
    """The caller's classification-head arguments."""

    num_classes: Optional[int]
    dropout_keep_prob: float
    prediction_fn: Callable
    spatial_squeeze: bool
    global_pool: bool


def _squeeze_if(logits: tf.Tensor, spatial_squeeze: bool) -> tf.Tensor:
    """Drop the two 1-sized spatial dimensions of 1x1-conv logits when asked to."""
    return tf.squeeze(logits, [1, 2], name="SpatialSqueeze") if spatial_squeeze else logits


def _classification_head(features: tf.Tensor, end_points: dict, layout: _HeadLayout, options: _HeadOptions) -> tuple:
    """Pool, dropout, 1x1 conv to logits and softmax, under the ``Logits`` variable scope."""
    with tf.compat.v1.variable_scope("Logits"):
        if options.global_pool:
            net = tf.reduce_mean(features, [1, 2], keepdims=True, name="global_pool")
            end_points["global_pool"] = net
        else:
            kernel = _fitted_kernel(features, layout.pool_size)
            net = slim.avg_pool2d(
                features, kernel, stride=layout.pool_stride, padding="VALID", scope=layout.pool_scope.format(*kernel)
            )
            end_points[layout.pool_end_point] = net
        if not options.num_classes:
            return net, end_points
        net = slim.dropout(net, keep_prob=options.dropout_keep_prob, scope=layout.dropout_scope)
        end_points["PreLogits"] = net
        logits = slim.conv2d(
            net, options.num_classes, [1, 1], activation_fn=None, normalizer_fn=None, scope=layout.logits_scope
        )
        logits = _squeeze_if(logits, options.spatial_squeeze)
    end_points["Logits"] = logits
    end_points["Predictions"] = options.prediction_fn(logits, scope="Predictions")
    return logits, end_points


def _check_depth_multiplier(depth_multiplier: float) -> None:
    """Reject non-positive channel multipliers before any layer is built."""
    if depth_multiplier <= 0:
        raise ValueError(f"depth_multiplier={depth_multiplier} must be greater than zero.")


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
    """Inception v1 / GoogLeNet (Szegedy et al. 2014) with batch norm: returns ``(logits, end_points)``."""
    options = _HeadOptions(num_classes, dropout_keep_prob, prediction_fn, spatial_squeeze, global_pool)
    with tf.compat.v1.variable_scope(scope, "InceptionV1", [inputs], reuse=reuse) as net_scope:
        with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
            features, end_points = inception_v1_base(inputs, scope=net_scope)
            return _classification_head(features, end_points, _V1_HEAD, options)


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
    """Inception v2 / BN-Inception (Ioffe & Szegedy 2015): returns ``(logits, end_points)``."""
    _check_depth_multiplier(depth_multiplier)
    options = _HeadOptions(num_classes, dropout_keep_prob, prediction_fn, spatial_squeeze, global_pool)
    with tf.compat.v1.variable_scope(scope, "InceptionV2", [inputs], reuse=reuse) as net_scope:
        with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
            features, end_points = inception_v2_base(
                inputs, scope=net_scope, min_depth=min_depth, depth_multiplier=depth_multiplier
            )
            return _classification_head(features, end_points, _V2_HEAD, options)


def _inception_v3_aux_logits(
    mixed_6e: tf.Tensor, num_classes: int, depth: Callable, spatial_squeeze: bool
) -> tf.Tensor:
    """The auxiliary classifier on ``Mixed_6e`` (official variables under ``AuxLogits``)."""
    with slim.arg_scope([slim.conv2d, slim.avg_pool2d], stride=1, padding="SAME"):
        with tf.compat.v1.variable_scope("AuxLogits"):
            net = slim.avg_pool2d(mixed_6e, [5, 5], stride=3, padding="VALID", scope="AvgPool_1a_5x5")
            net = slim.conv2d(net, depth(128), [1, 1], scope="Conv2d_1b_1x1")
            kernel = _fitted_kernel(net, 5)
            net = slim.conv2d(
                net,
                depth(768),
                kernel,
                padding="VALID",
                weights_initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.01),
                scope="Conv2d_2a_{}x{}".format(*kernel),
            )
            aux_logits = slim.conv2d(
                net,
                num_classes,
                [1, 1],
                activation_fn=None,
                normalizer_fn=None,
                weights_initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.001),
                scope="Conv2d_2b_1x1",
            )
            return _squeeze_if(aux_logits, spatial_squeeze)


def inception_v3(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1000,
    is_training: bool = True,
    dropout_keep_prob: float = 0.8,
    min_depth: int = 16,
    depth_multiplier: float = 1.0,
    prediction_fn: Callable = slim.softmax,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    create_aux_logits: bool = True,
    scope: str = "InceptionV3",
    global_pool: bool = False,
) -> tuple:
    """Inception v3 (Szegedy et al. 2015), with the auxiliary head: returns ``(logits, end_points)``."""
    _check_depth_multiplier(depth_multiplier)
    options = _HeadOptions(num_classes, dropout_keep_prob, prediction_fn, spatial_squeeze, global_pool)

    def depth(channels: int) -> int:
        return max(int(channels * depth_multiplier), min_depth)

    with tf.compat.v1.variable_scope(scope, "InceptionV3", [inputs], reuse=reuse) as net_scope:
        with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
            features, end_points = inception_v3_base(
                inputs, scope=net_scope, min_depth=min_depth, depth_multiplier=depth_multiplier
            )
            if create_aux_logits and num_classes:
                end_points["AuxLogits"] = _inception_v3_aux_logits(
                    end_points["Mixed_6e"], num_classes, depth, spatial_squeeze
                )
            return _classification_head(features, end_points, _V3_HEAD, options)


inception_v1.default_image_size = 224
inception_v2.default_image_size = 224
inception_v3.default_image_size = 299
