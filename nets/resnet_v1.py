"""ResNet v1 (He et al. 2015): batch norm after every convolution (official module ``nets.resnet_v1``).

``resnet_v1(inputs, blocks, ...)`` builds any stack of :class:`nets.resnet_utils.Block`; the
``resnet_v1_<depth>`` functions are the bottleneck ResNets of the official checkpoints. Typical use::

    with slim.arg_scope(resnet_v1.resnet_arg_scope()):
        logits, end_points = resnet_v1.resnet_v1_101(images, 1000, is_training=False)
        # dense prediction: features at 1/16 of the input resolution
        features, end_points = resnet_v1.resnet_v1_101(images, None, global_pool=False, output_stride=16)

``resnet_v1_18`` and ``resnet_v1_34`` (basic residual units, not in the official package) are this
project's additions, with the same layout and arguments.
"""

from typing import Optional, Sequence

import tensorflow as tf
import tf_slim as slim

from nets import resnet_utils
from nets._impl import basic_resnet
from nets._impl.resnet_builder import (
    NoOpScope,
    ResnetOptions,
    ResnetVariant,
    bottleneck_block,
    bottleneck_blocks,
    build_resnet,
)

resnet_arg_scope = resnet_utils.resnet_arg_scope
__all__ = ["NoOpScope", "bottleneck", "resnet_arg_scope", "resnet_utils", "resnet_v1", "resnet_v1_block",
           "resnet_v1_50", "resnet_v1_101", "resnet_v1_152", "resnet_v1_200", "resnet_v1_18", "resnet_v1_34"]


@slim.add_arg_scope
def bottleneck(
    inputs: tf.Tensor,
    depth: int,
    depth_bottleneck: int,
    stride: int,
    rate: int = 1,
    outputs_collections: Optional[str] = None,
    scope: Optional[str] = None,
    use_bounded_activations: bool = False,
) -> tf.Tensor:
    """Bottleneck residual unit with batch norm after each convolution (He et al. 2016, Fig. 1a).

    ``relu(shortcut + conv3(conv2(conv1(inputs))))`` with 1x1 ``conv1`` (``depth_bottleneck``),
    3x3 ``conv2`` carrying ``stride`` and ``rate``, and 1x1 ``conv3`` (``depth``, no activation);
    the shortcut is the subsampled input when the depth is kept, else a 1x1 projection.

    Args:
        inputs: [batch, height, width, channels].
        depth: output depth.
        depth_bottleneck: depth of the two inner convolutions.
        stride: the unit's stride.
        rate: atrous rate of ``conv2``.
        outputs_collections: collection receiving the unit's output.
        scope: variable scope (default ``bottleneck_v1``).
        use_bounded_activations: ReLU6 and a [-6, 6] clip instead of ReLU (friendlier to quantization).

    Returns:
        The unit's output.
    """
    with tf.compat.v1.variable_scope(scope, "bottleneck_v1", [inputs]) as unit_scope:
        depth_in = slim.utils.last_dimension(inputs.get_shape(), min_rank=4)
        if depth == depth_in:
            shortcut = resnet_utils.subsample(inputs, stride, "shortcut")
        else:
            shortcut = slim.conv2d(
                inputs, depth, [1, 1], stride=stride,
                activation_fn=tf.nn.relu6 if use_bounded_activations else None, scope="shortcut",
            )
        residual = slim.conv2d(inputs, depth_bottleneck, [1, 1], stride=1, scope="conv1")
        residual = resnet_utils.conv2d_same(residual, depth_bottleneck, 3, stride, rate=rate, scope="conv2")
        residual = slim.conv2d(residual, depth, [1, 1], stride=1, activation_fn=None, scope="conv3")
        if use_bounded_activations:
            output = tf.nn.relu6(shortcut + tf.clip_by_value(residual, -6.0, 6.0))
        else:
            output = tf.nn.relu(shortcut + residual)
        return slim.utils.collect_named_outputs(outputs_collections, unit_scope.name, output)


_BOTTLENECK_V1 = ResnetVariant(default_scope="resnet_v1", unit_fns=(bottleneck,))
_BASIC_V1 = ResnetVariant(default_scope="resnet_v1", unit_fns=(basic_resnet.basic_block,))


def resnet_v1(
    inputs: tf.Tensor,
    blocks: Sequence[resnet_utils.Block],
    num_classes: Optional[int] = None,
    is_training: Optional[bool] = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    include_root_block: bool = True,
    spatial_squeeze: bool = True,
    store_non_strided_activations: bool = False,
    reuse: Optional[bool] = None,
    scope: Optional[str] = None,
) -> tuple:
    """Generate a ResNet v1 of ``blocks``: root ``conv1``/``pool1``, the blocks, pooling and ``logits``.

    Args:
        inputs: [batch, height, width, channels]; for dense prediction, sizes of 32k + 1 align the
            output corners with the input's.
        blocks: the :class:`nets.resnet_utils.Block` descriptions.
        num_classes: logits width; 0 or None returns the features before the logits layer.
        is_training: batch-norm mode; None leaves it to an enclosing ``slim.arg_scope``.
        global_pool: average the last block's output over space (classification) or not (dense).
        output_stride: input/output resolution ratio (atrous convolution past it); None: nominal.
        include_root_block: build ``conv1`` and ``pool1``.
        spatial_squeeze: logits ``[batch, num_classes]`` instead of ``[batch, 1, 1, num_classes]``.
        store_non_strided_activations: end points of the blocks at full resolution (see
            ``resnet_utils.stack_blocks_dense``).
        reuse: reuse the variables of ``scope``.
        scope: variable scope (default ``resnet_v1``).

    Returns:
        ``(net, end_points)``: logits or features, and the activations by name (blocks, units,
        convolutions, ``global_pool``, ``<scope>/logits``, ``<scope>/spatial_squeeze``, ``predictions``).

    Raises:
        ValueError: if ``output_stride`` cannot be reached or the arguments are malformed.
    """
    options = ResnetOptions(
        num_classes, is_training, global_pool, output_stride, include_root_block, spatial_squeeze,
        store_non_strided_activations, reuse, scope,
    )
    return build_resnet(inputs, blocks, _BOTTLENECK_V1, options)


resnet_v1.default_image_size = 224


def resnet_v1_block(scope: str, base_depth: int, num_units: int, stride: int) -> resnet_utils.Block:
    """A block of ``num_units`` v1 bottleneck units of output depth ``4 * base_depth``, strided in the last one."""
    return bottleneck_block(bottleneck, scope, base_depth, num_units, stride)


def _bottleneck_resnet_v1(layers: int, inputs, num_classes, is_training, global_pool, output_stride,
                          spatial_squeeze, store_non_strided_activations, min_base_depth, depth_multiplier,
                          reuse, scope) -> tuple:
    blocks = bottleneck_blocks(resnet_v1_block, layers, min_base_depth, depth_multiplier)
    return resnet_v1(
        inputs, blocks, num_classes, is_training, global_pool=global_pool, output_stride=output_stride,
        include_root_block=True, spatial_squeeze=spatial_squeeze,
        store_non_strided_activations=store_non_strided_activations, reuse=reuse, scope=scope,
    )


def resnet_v1_50(
    inputs: tf.Tensor,
    num_classes: Optional[int] = None,
    is_training: Optional[bool] = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    store_non_strided_activations: bool = False,
    min_base_depth: int = 8,
    depth_multiplier: float = 1,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v1_50",
) -> tuple:
    """ResNet-50 v1; bottleneck widths scaled by ``depth_multiplier`` (at least ``min_base_depth``).

    See :func:`resnet_v1` for the other arguments and the return value.
    """
    return _bottleneck_resnet_v1(50, inputs, num_classes, is_training, global_pool, output_stride, spatial_squeeze,
                                 store_non_strided_activations, min_base_depth, depth_multiplier, reuse, scope)


def resnet_v1_101(
    inputs: tf.Tensor,
    num_classes: Optional[int] = None,
    is_training: Optional[bool] = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    store_non_strided_activations: bool = False,
    min_base_depth: int = 8,
    depth_multiplier: float = 1,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v1_101",
) -> tuple:
    """ResNet-101 v1; see :func:`resnet_v1_50`."""
    return _bottleneck_resnet_v1(101, inputs, num_classes, is_training, global_pool, output_stride, spatial_squeeze,
                                 store_non_strided_activations, min_base_depth, depth_multiplier, reuse, scope)


# The official 152- and 200-layer functions take store_non_strided_activations before
# spatial_squeeze (unlike 50 and 101); the order is kept for positional callers.
def resnet_v1_152(
    inputs: tf.Tensor,
    num_classes: Optional[int] = None,
    is_training: Optional[bool] = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    store_non_strided_activations: bool = False,
    spatial_squeeze: bool = True,
    min_base_depth: int = 8,
    depth_multiplier: float = 1,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v1_152",
) -> tuple:
    """ResNet-152 v1; see :func:`resnet_v1_50`."""
    return _bottleneck_resnet_v1(152, inputs, num_classes, is_training, global_pool, output_stride, spatial_squeeze,
                                 store_non_strided_activations, min_base_depth, depth_multiplier, reuse, scope)


def resnet_v1_200(
    inputs: tf.Tensor,
    num_classes: Optional[int] = None,
    is_training: Optional[bool] = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    store_non_strided_activations: bool = False,
    spatial_squeeze: bool = True,
    min_base_depth: int = 8,
    depth_multiplier: float = 1,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v1_200",
) -> tuple:
    """ResNet-200 v1 (He et al. 2016); see :func:`resnet_v1_50`."""
    return _bottleneck_resnet_v1(200, inputs, num_classes, is_training, global_pool, output_stride, spatial_squeeze,
                                 store_non_strided_activations, min_base_depth, depth_multiplier, reuse, scope)


def _basic_resnet_v1(layers: int, inputs, num_classes, is_training, global_pool, output_stride, spatial_squeeze,
                     store_non_strided_activations, reuse, scope) -> tuple:
    options = ResnetOptions(
        num_classes, is_training, global_pool, output_stride, True, spatial_squeeze,
        store_non_strided_activations, reuse, scope,
    )
    return build_resnet(inputs, basic_resnet.basic_blocks(layers), _BASIC_V1, options)


def resnet_v1_18(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1000,
    is_training: Optional[bool] = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    store_non_strided_activations: bool = False,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v1_18",
) -> tuple:
    """ResNet-18 (basic units [2, 2, 2, 2]; not in the official package). See :func:`resnet_v1`."""
    return _basic_resnet_v1(18, inputs, num_classes, is_training, global_pool, output_stride, spatial_squeeze,
                            store_non_strided_activations, reuse, scope)


def resnet_v1_34(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1000,
    is_training: Optional[bool] = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    store_non_strided_activations: bool = False,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v1_34",
) -> tuple:
    """ResNet-34 (basic units [3, 4, 6, 3]; not in the official package). See :func:`resnet_v1`."""
    return _basic_resnet_v1(34, inputs, num_classes, is_training, global_pool, output_stride, spatial_squeeze,
                            store_non_strided_activations, reuse, scope)


for _network in (resnet_v1_50, resnet_v1_101, resnet_v1_152, resnet_v1_200, resnet_v1_18, resnet_v1_34):
    _network.default_image_size = resnet_v1.default_image_size
