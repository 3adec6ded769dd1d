"""Inception v3 (Szegedy et al. 2015, "Rethinking the Inception Architecture") with the official TF-Slim
names (``nets/inception_v3.py``).

The trunk (``inception_v3_base``) is tf_slim's, which already has the official
signature, end points and variables. The classifier is written here because
the official one does more than tf_slim's: it records the pooled features
(``AvgPool_1a``) and ``PreLogits``, accepts ``global_pool``, and returns the
pooled features when ``num_classes`` is 0 or None.
"""

from typing import Callable, Optional

import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import inception_v3 as _slim_inception_v3

from nets import inception_utils
from nets._impl import inception_parts
from nets._impl.initializers import trunc_normal


inception_v3_base = _slim_inception_v3.inception_v3_base

_HEAD = inception_parts.HeadLayout(
    pool_size=8,
    pool_stride=2,
    pool_end_point="AvgPool_1a",
    pool_scope="AvgPool_1a_{}x{}",
    dropout_scope="Dropout_1b",
    logits_scope="Conv2d_1c_1x1",
    records_pre_logits=True,
    predictions_under_logits=False,
)


def _aux_logits(mixed_6e: tf.Tensor, num_classes: int, depth: Callable[[int], int], spatial_squeeze: bool) -> tf.Tensor:
    """The auxiliary classifier on ``Mixed_6e`` (official variables under ``AuxLogits``)."""
    with slim.arg_scope([slim.conv2d, slim.avg_pool2d], stride=1, padding="SAME"):
        with tf.compat.v1.variable_scope("AuxLogits"):
            net = slim.avg_pool2d(mixed_6e, [5, 5], stride=3, padding="VALID", scope="AvgPool_1a_5x5")
            net = slim.conv2d(net, depth(128), [1, 1], scope="Conv2d_1b_1x1")
            kernel = inception_parts.fitted_kernel(net, 5)
            net = slim.conv2d(
                net,
                depth(768),
                kernel,
                padding="VALID",
                weights_initializer=trunc_normal(0.01),
                scope="Conv2d_2a_{}x{}".format(*kernel),
            )
            aux_logits = slim.conv2d(
                net,
                num_classes,
                [1, 1],
                activation_fn=None,
                normalizer_fn=None,
                weights_initializer=trunc_normal(0.001),
                scope="Conv2d_2b_1x1",
            )
            return inception_parts.squeeze_if(aux_logits, spatial_squeeze)


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
    """Inception v3 classifier with the auxiliary head; returns ``(logits, end_points)``.

    Args:
        inputs: a [batch, height, width, 3] image tensor (default size 299).
        num_classes: number of classes; 0 or None returns the pooled features (``AvgPool_1a``)
            and builds no auxiliary head.
        is_training: training mode of batch norm and dropout.
        dropout_keep_prob: fraction of activations kept by dropout.
        min_depth: smallest number of channels when ``depth_multiplier`` < 1.
        depth_multiplier: scales the channels of every convolution; must be positive.
        prediction_fn: turns logits into ``end_points['Predictions']``.
        spatial_squeeze: False keeps the logits (and auxiliary logits) [batch, 1, 1, classes].
        reuse: reuse the variables of an earlier build under ``scope``.
        create_aux_logits: build the auxiliary classifier on ``Mixed_6e`` (``end_points['AuxLogits']``).
        scope: variable scope.
        global_pool: average over the whole feature map instead of an 8x8 window (any input size).

    Raises:
        ValueError: if ``depth_multiplier`` <= 0.
    """
    depth = inception_parts.depth_function(depth_multiplier, min_depth)
    options = inception_parts.HeadOptions(num_classes, dropout_keep_prob, prediction_fn, spatial_squeeze, global_pool)
    with tf.compat.v1.variable_scope(scope, "InceptionV3", [inputs], reuse=reuse) as net_scope:
        with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
            features, end_points = inception_v3_base(
                inputs, scope=net_scope, min_depth=min_depth, depth_multiplier=depth_multiplier
            )
            if create_aux_logits and num_classes:
                end_points["AuxLogits"] = _aux_logits(end_points["Mixed_6e"], num_classes, depth, spatial_squeeze)
            return inception_parts.classification_head(features, end_points, _HEAD, options)


inception_v3.default_image_size = 299

inception_v3_arg_scope = inception_utils.inception_arg_scope
