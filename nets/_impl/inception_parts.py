"""Pieces shared by the Inception networks: batch-norm settings, input checks, layer runner, classifier heads.

Inception v1-v3 end in a pooled 1x1-convolution classifier whose layer names
differ per version (``_HeadLayout``); Inception-v4 and Inception-ResNet-v2
(Szegedy et al. 2016) reduce a 299x299 image to a 17x17 grid (where the
auxiliary classifier sits) and then an 8x8 grid with the same sequence of
VALID convolutions and poolings, so they share the smallest input sizes and a
fully connected classifier; only the variable-scope names of their auxiliary
heads differ between the official checkpoints.
"""

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple

import tensorflow as tf
import tf_slim as slim

# Smallest height/width for which every VALID layer of Inception-v4 / Inception-ResNet-v2 keeps a
# positive size: 75 reaches a 3x3 grid before the last reduction; the auxiliary head's 5x5
# pooling needs a 5x5 grid at the 17x17 level, i.e. 107.
MIN_IMAGE_SIZE = 75
MIN_IMAGE_SIZE_WITH_AUX_LOGITS = 107

LayerFn = Callable[..., tf.Tensor]


def batch_norm_params(decay: float, epsilon: float, updates_collections: Optional[str], scale: bool) -> dict:
    """Keyword arguments for ``slim.batch_norm`` as the Inception arg_scopes pass them."""
    return {
        "decay": decay,
        "epsilon": epsilon,
        "updates_collections": updates_collections,
        "scale": scale,
    }


def depth_function(depth_multiplier: float, min_depth: int) -> Callable[[int], int]:
    """``depth(channels)``: channels scaled by ``depth_multiplier``, at least ``min_depth``.

    Raises:
        ValueError: if ``depth_multiplier`` is not positive.
    """
    if depth_multiplier <= 0:
        raise ValueError(f"depth_multiplier={depth_multiplier} must be greater than zero.")

    def depth(channels: int) -> int:
        return max(int(channels * depth_multiplier), min_depth)

    return depth


def check_inputs(inputs: tf.Tensor, with_aux_logits: bool, network: str) -> None:
    """Raise ValueError unless ``inputs`` is 4-D and large enough for ``network`` (static sizes only)."""
    shape = inputs.get_shape()
    if shape.rank != 4:
        raise ValueError(
            f"{network}: inputs must be a 4-D [batch, height, width, channels] tensor, got shape {shape}; "
            "add the missing batch or channel dimension."
        )
    spatial = shape.as_list()[1:3]
    if with_aux_logits and None in spatial:
        raise ValueError(
            f"{network}: inputs needs a static height and width for the auxiliary head, got shape {shape}; "
            "give the placeholder a fixed size or pass create_aux_logits=False."
        )
    min_size = MIN_IMAGE_SIZE_WITH_AUX_LOGITS if with_aux_logits else MIN_IMAGE_SIZE
    if any(size is not None and size < min_size for size in spatial):
        raise ValueError(
            f"{network}: inputs must be at least {min_size}x{min_size} pixels, got shape {shape}; "
            "resize the images (the network's default size is 299)."
        )


def concat_branches(branches: list, axis: int = 3) -> tf.Tensor:
    """Join parallel Inception branches along the channel axis."""
    return tf.concat(axis=axis, values=branches)


def run_layers(
    net: tf.Tensor, layers: Sequence[Tuple[str, LayerFn]], final_endpoint: str, end_points: dict
) -> tf.Tensor:
    """Apply ``(end_point_name, layer_fn)`` pairs in order, recording each output, up to ``final_endpoint``.

    Each ``layer_fn(net, scope=end_point_name)`` builds one end point under its own scope.

    Raises:
        ValueError: if ``final_endpoint`` is not one of the layers' names.
    """
    names = [name for name, _ in layers]
    if final_endpoint not in names:
        raise ValueError(f"final_endpoint must be one of {names}, got {final_endpoint!r}.")
    for name, layer in layers:
        net = layer(net, scope=name)
        end_points[name] = net
        if name == final_endpoint:
            break
    return net


def fitted_kernel(features: tf.Tensor, size: int) -> list:
    """A ``size`` x ``size`` kernel, shrunk to the feature map when that is statically smaller."""
    height, width = features.shape.as_list()[1:3]
    return [min(size, height or size), min(size, width or size)]


def squeeze_if(logits: tf.Tensor, spatial_squeeze: bool) -> tf.Tensor:
    """Drop the two 1-sized spatial dimensions of 1x1-conv logits when asked to."""
    return tf.squeeze(logits, [1, 2], name="SpatialSqueeze") if spatial_squeeze else logits


@dataclass(frozen=True)
class HeadLayout:
    """Layer and end-point names of one Inception v1-v3 classification head (they differ between versions).

    ``predictions_under_logits``: the official v1 applies ``prediction_fn`` inside the ``Logits`` scope
    (``InceptionV1/Logits/Predictions``), v2 and v3 after it (``InceptionV3/Predictions``).
    """

    pool_size: int
    pool_stride: int
    pool_end_point: str
    pool_scope: str
    dropout_scope: str
    logits_scope: str
    records_pre_logits: bool
    predictions_under_logits: bool


@dataclass(frozen=True)
class HeadOptions:
    """The caller's classification-head arguments."""

    num_classes: Optional[int]
    dropout_keep_prob: float
    prediction_fn: Callable
    spatial_squeeze: bool
    global_pool: bool


def classification_head(features: tf.Tensor, end_points: dict, layout: HeadLayout, options: HeadOptions) -> tuple:
    """Inception v1-v3 head under the ``Logits`` scope: pool, dropout, 1x1 conv to logits, predictions.

    Returns ``(logits, end_points)``, or the pooled features when ``num_classes`` is 0 or None.
    The pooling kernel shrinks to the feature map for inputs smaller than the default size.
    """
    with tf.compat.v1.variable_scope("Logits"):
        if options.global_pool:
            net = tf.reduce_mean(features, [1, 2], keepdims=True, name="global_pool")
            end_points["global_pool"] = net
        else:
            kernel = fitted_kernel(features, layout.pool_size)
            net = slim.avg_pool2d(
                features, kernel, stride=layout.pool_stride, padding="VALID", scope=layout.pool_scope.format(*kernel)
            )
            end_points[layout.pool_end_point] = net
        if not options.num_classes:
            return net, end_points
        net = slim.dropout(net, keep_prob=options.dropout_keep_prob, scope=layout.dropout_scope)
        if layout.records_pre_logits:
            end_points["PreLogits"] = net
        logits = slim.conv2d(
            net, options.num_classes, [1, 1], activation_fn=None, normalizer_fn=None, scope=layout.logits_scope
        )
        logits = squeeze_if(logits, options.spatial_squeeze)
        end_points["Logits"] = logits
        if layout.predictions_under_logits:
            end_points["Predictions"] = options.prediction_fn(logits, scope="Predictions")
    if not layout.predictions_under_logits:
        end_points["Predictions"] = options.prediction_fn(logits, scope="Predictions")
    return logits, end_points


def aux_logits_head(net: tf.Tensor, num_classes: int, conv_scope: str, logits_scope: str) -> tf.Tensor:
    """Inception-v4 / Inception-ResNet-v2 auxiliary classifier (scope ``AuxLogits``): 5x5/3 average pool,
    1x1 conv to 128, a conv to 768 over the whole remaining grid (``conv_scope``), then a fully
    connected layer (``logits_scope``)."""
    with tf.compat.v1.variable_scope("AuxLogits"):
        aux = slim.avg_pool2d(net, [5, 5], stride=3, padding="VALID", scope="AvgPool_1a_5x5")
        aux = slim.conv2d(aux, 128, [1, 1], scope="Conv2d_1b_1x1")
        aux = slim.conv2d(aux, 768, aux.get_shape().as_list()[1:3], padding="VALID", scope=conv_scope)
        aux = slim.flatten(aux)
        return slim.fully_connected(aux, num_classes, activation_fn=None, scope=logits_scope)


def logits_head(
    net: tf.Tensor,
    num_classes: Optional[int],
    is_training: bool,
    dropout_keep_prob: float,
    end_points: dict,
    pool_scope: str = "AvgPool_1a",
    flatten_before_dropout: bool = False,
) -> tf.Tensor:
    """Inception-v4 / Inception-ResNet-v2 classifier (scope ``Logits``): global average pool, dropout and
    flatten, fully connected ``Logits``.

    The two official heads name their layers differently, and their tensors keep those names:
    Inception-v4 pools in ``pool_scope`` ``AvgPool_1a``, drops out in ``Dropout_1b`` and then flattens
    in ``PreLogitsFlatten``; Inception-ResNet-v2 pools in ``AvgPool_1a_8x8``, flattens first
    (``flatten_before_dropout``, scope ``Flatten``) and drops out in ``Dropout``. Either order gives
    the same values, as dropout is elementwise.

    Fills ``end_points`` (``global_pool``, ``PreLogitsFlatten``, ``Logits``,
    ``Predictions``) and returns the logits, or the pooled features when
    ``num_classes`` is 0 or None.
    """
    with tf.compat.v1.variable_scope("Logits"):
        grid = net.get_shape()[1:3]
        if grid.is_fully_defined():
            net = slim.avg_pool2d(net, grid.as_list(), padding="VALID", scope=pool_scope)
        else:
            net = tf.reduce_mean(net, [1, 2], keepdims=True, name="global_pool")
        end_points["global_pool"] = net
        if not num_classes:
            return net
        if flatten_before_dropout:
            net = slim.flatten(net)
            net = slim.dropout(net, dropout_keep_prob, is_training=is_training, scope="Dropout")
        else:
            net = slim.dropout(net, dropout_keep_prob, is_training=is_training, scope="Dropout_1b")
            net = slim.flatten(net, scope="PreLogitsFlatten")
        end_points["PreLogitsFlatten"] = net
        logits = slim.fully_connected(net, num_classes, activation_fn=None, scope="Logits")
        end_points["Logits"] = logits
        end_points["Predictions"] = tf.nn.softmax(logits, name="Predictions")
        return logits
