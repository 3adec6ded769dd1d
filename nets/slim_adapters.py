"""Pieces that bring tf_slim's own network definitions up to the official TF-Slim conventions.

tf_slim 1.1.0 ships AlexNet, OverFeat, VGG, Inception v1-v3 and ResNet v1/v2
with the official variables, but its ResNets return unsqueezed logits without
the ``global_pool`` end point, and its classifiers lack a ``Predictions`` end
point. The helpers here add exactly those outputs; they create no variables
beyond the official ones.
"""

from typing import Callable, Optional

import tensorflow as tf
import tf_slim as slim

EndPoints = dict


def add_predictions(logits: tf.Tensor, end_points: EndPoints) -> EndPoints:
    """Record the softmax of ``logits`` as ``end_points['Predictions']`` (the zoo-wide convention)."""
    end_points["Predictions"] = slim.softmax(logits, scope="Predictions")
    return end_points


def require_num_classes(num_classes: Optional[int], network: str) -> None:
    """Reject a missing class count for networks whose tf_slim definition always builds logits."""
    if not num_classes or num_classes < 0:
        raise ValueError(
            f"num_classes={num_classes!r} is not supported by {network}: pass a positive number of "
            "classes (tf_slim's definition has no pre-logits mode)."
        )


RESNET_UNITS_PER_BLOCK = {
    50: (3, 4, 6, 3),
    101: (3, 4, 23, 3),
    152: (3, 8, 36, 3),
    200: (3, 24, 36, 3),
}
_BLOCK_BASE_DEPTHS = (64, 128, 256, 512)
_BLOCK_STRIDES = (2, 2, 2, 1)


def bottleneck_blocks(
    block_fn: Callable, depth: int, min_base_depth: int, depth_multiplier: float
) -> list:
    """The four ``block1..block4`` descriptions of a ResNet of the given depth (50/101/152/200).

    ``depth_multiplier`` scales every bottleneck width, never below ``min_base_depth``,
    as the official definitions do.
    """
    if depth not in RESNET_UNITS_PER_BLOCK:
        raise ValueError(
            f"depth={depth} is not a bottleneck ResNet depth; use one of {sorted(RESNET_UNITS_PER_BLOCK)}."
        )
    if depth_multiplier <= 0:
        raise ValueError(f"depth_multiplier={depth_multiplier} must be greater than zero.")
    units = RESNET_UNITS_PER_BLOCK[depth]
    return [
        block_fn(
            f"block{index + 1}",
            base_depth=max(int(base_depth * depth_multiplier), min_base_depth),
            num_units=num_units,
            stride=stride,
        )
        for index, (base_depth, num_units, stride) in enumerate(zip(_BLOCK_BASE_DEPTHS, units, _BLOCK_STRIDES))
    ]


def resnet_classifier(
    features: tf.Tensor,
    end_points: EndPoints,
    scope_name: str,
    num_classes: Optional[int],
    global_pool: bool,
    spatial_squeeze: bool,
) -> tuple:
    """Add the official ResNet head (1x1 ``logits`` conv, squeeze, softmax) inside the network scope.

    ``features`` is the tf_slim trunk output (already globally pooled when
    ``global_pool``). With ``num_classes`` 0 or None the features are returned.
    """
    if global_pool:
        end_points["global_pool"] = features
    if not num_classes:
        return features, end_points
    logits = slim.conv2d(features, num_classes, [1, 1], activation_fn=None, normalizer_fn=None, scope="logits")
    end_points[f"{scope_name}/logits"] = logits
    if spatial_squeeze:
        logits = tf.squeeze(logits, [1, 2], name="SpatialSqueeze")
        end_points[f"{scope_name}/spatial_squeeze"] = logits
    end_points["predictions"] = slim.softmax(logits, scope="predictions")
    end_points["Predictions"] = end_points["predictions"]
    return logits, end_points


def resnet_network(trunk_fn: Callable, block_fn: Callable, family: str, depth: int,
                   default_image_size: int = 224) -> Callable:
    """Make the official ``<family>_<depth>`` function on tf_slim's trunk (``trunk_fn``) plus the official head.

    The trunk is built inside the network's variable scope, re-entered by tf_slim, so the head's
    ``logits`` variables land at ``<scope>/logits`` as in the official checkpoints.
    """
    name = f"{family}_{depth}"

    def network(
        inputs: tf.Tensor,
        num_classes: Optional[int] = None,
        is_training: bool = True,
        global_pool: bool = True,
        output_stride: Optional[int] = None,
        spatial_squeeze: bool = True,
        min_base_depth: int = 8,
        depth_multiplier: float = 1,
        reuse: Optional[bool] = None,
        scope: str = name,
    ) -> tuple:
        blocks = bottleneck_blocks(block_fn, depth, min_base_depth, depth_multiplier)
        with tf.compat.v1.variable_scope(scope, name, [inputs], reuse=reuse) as net_scope:
            features, end_points = trunk_fn(
                inputs, blocks, num_classes=None, is_training=is_training, global_pool=global_pool,
                output_stride=output_stride, include_root_block=True, reuse=reuse, scope=net_scope,
            )
            return resnet_classifier(features, end_points, net_scope.name, num_classes, global_pool, spatial_squeeze)

    network.__name__ = network.__qualname__ = name
    network.__doc__ = (
        f"ResNet-{depth} ({family}): returns ``(logits, end_points)``, or the pooled features when "
        "``num_classes`` is 0/None."
    )
    network.default_image_size = default_image_size
    return network
