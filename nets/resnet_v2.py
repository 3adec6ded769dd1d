"""ResNet v2, pre-activation (He et al. 2016) with the official TF-Slim outputs, built on tf_slim's definition.

Same variables as the official checkpoints; adds what tf_slim lacks: squeezed
logits ``[batch, num_classes]`` (``spatial_squeeze``), the ``global_pool`` and
``<scope>/spatial_squeeze`` end points, ``depth_multiplier``/``min_base_depth``,
and ``default_image_size``.
"""

from typing import Optional

import tensorflow as tf
from tf_slim.nets import resnet_utils as _slim_resnet_utils
from tf_slim.nets import resnet_v2 as _slim_resnet_v2

from nets.slim_adapters import ResNetOptions, build_resnet

resnet_arg_scope = _slim_resnet_utils.resnet_arg_scope

DEFAULT_IMAGE_SIZE = 224


def resnet_v2_50(
    inputs: tf.Tensor,
    num_classes: Optional[int] = None,
    is_training: bool = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    min_base_depth: int = 8,
    depth_multiplier: float = 1,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v2_50",
) -> tuple:
    """ResNet-50 v2: returns ``(logits, end_points)``, or the pooled features when ``num_classes`` is 0/None."""
    options = ResNetOptions(
        num_classes, is_training, global_pool, output_stride, spatial_squeeze, min_base_depth, depth_multiplier, reuse
    )
    return build_resnet(
        inputs, _slim_resnet_v2.resnet_v2, _slim_resnet_v2.resnet_v2_block, 50, options, scope, "resnet_v2"
    )


resnet_v2_50.default_image_size = DEFAULT_IMAGE_SIZE


def resnet_v2_101(
    inputs: tf.Tensor,
    num_classes: Optional[int] = None,
    is_training: bool = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    min_base_depth: int = 8,
    depth_multiplier: float = 1,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v2_101",
) -> tuple:
    """ResNet-101 v2: returns ``(logits, end_points)``, or the pooled features when ``num_classes`` is 0/None."""
    options = ResNetOptions(
        num_classes, is_training, global_pool, output_stride, spatial_squeeze, min_base_depth, depth_multiplier, reuse
    )
    return build_resnet(
        inputs, _slim_resnet_v2.resnet_v2, _slim_resnet_v2.resnet_v2_block, 101, options, scope, "resnet_v2"
    )


resnet_v2_101.default_image_size = DEFAULT_IMAGE_SIZE


def resnet_v2_152(
    inputs: tf.Tensor,
    num_classes: Optional[int] = None,
    is_training: bool = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    min_base_depth: int = 8,
    depth_multiplier: float = 1,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v2_152",
) -> tuple:
    """ResNet-152 v2: returns ``(logits, end_points)``, or the pooled features when ``num_classes`` is 0/None."""
    options = ResNetOptions(
        num_classes, is_training, global_pool, output_stride, spatial_squeeze, min_base_depth, depth_multiplier, reuse
    )
    return build_resnet(
        inputs, _slim_resnet_v2.resnet_v2, _slim_resnet_v2.resnet_v2_block, 152, options, scope, "resnet_v2"
    )


resnet_v2_152.default_image_size = DEFAULT_IMAGE_SIZE


def resnet_v2_200(
    inputs: tf.Tensor,
    num_classes: Optional[int] = None,
    is_training: bool = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    min_base_depth: int = 8,
    depth_multiplier: float = 1,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v2_200",
) -> tuple:
    """ResNet-200 v2: returns ``(logits, end_points)``, or the pooled features when ``num_classes`` is 0/None."""
    options = ResNetOptions(
        num_classes, is_training, global_pool, output_stride, spatial_squeeze, min_base_depth, depth_multiplier, reuse
    )
    return build_resnet(
        inputs, _slim_resnet_v2.resnet_v2, _slim_resnet_v2.resnet_v2_block, 200, options, scope, "resnet_v2"
    )


resnet_v2_200.default_image_size = DEFAULT_IMAGE_SIZE
