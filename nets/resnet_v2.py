"""ResNet v2 (He et al. 2016): full pre-activation units (official module ``nets.resnet_v2``).

Batch norm and ReLU come *before* each convolution; so ``conv1`` has neither, and a final
``postnorm`` batch norm + ReLU follows the last block. ``resnet_v2(inputs, blocks, ...)`` builds
any stack of :class:`nets.resnet_utils.Block`; ``resnet_v2_<depth>`` are the official networks::

    with slim.arg_scope(resnet_v2.resnet_arg_scope()):
        logits, end_points = resnet_v2.resnet_v2_101(images, 1001, is_training=False)
"""

from typing import Optional, Sequence

import tensorflow as tf
import tf_slim as slim

from nets import resnet_utils
from nets._impl.resnet_builder import (
    ResnetOptions,
    ResnetVariant,
    bottleneck_block,
    bottleneck_blocks,
    build_resnet,
)

resnet_arg_scope = resnet_utils.resnet_arg_scope


@slim.add_arg_scope
def bottleneck(
    inputs: tf.Tensor,
    depth: int,
    depth_bottleneck: int,
    stride: int,
    rate: int = 1,
    outputs_collections: Optional[str] = None,
    scope: Optional[str] = None,
) -> tf.Tensor:
    """Pre-activation bottleneck unit (He et al. 2016, Fig. 1b): ``shortcut + conv3(conv2(conv1(preact)))``.

    ``preact`` is batch norm + ReLU of the input; the 1x1 ``conv3`` and the projection shortcut
    (used when the depth changes; otherwise the subsampled input) have neither BN nor activation.

    Args:
        inputs: [batch, height, width, channels].
        depth: output depth.
        depth_bottleneck: depth of the two inner convolutions.
        stride: the unit's stride (carried by the 3x3 ``conv2``).
        rate: atrous rate of ``conv2``.
        outputs_collections: collection receiving the unit's output.
        scope: variable scope (default ``bottleneck_v2``).

    Returns:
        The unit's output.
    """
    with tf.compat.v1.variable_scope(scope, "bottleneck_v2", [inputs]) as unit_scope:
        depth_in = slim.utils.last_dimension(inputs.get_shape(), min_rank=4)
        preact = slim.batch_norm(inputs, activation_fn=tf.nn.relu, scope="preact")
        if depth == depth_in:
            shortcut = resnet_utils.subsample(inputs, stride, "shortcut")
        else:
            shortcut = slim.conv2d(
                preact, depth, [1, 1], stride=stride, normalizer_fn=None, activation_fn=None, scope="shortcut"
            )
        residual = slim.conv2d(preact, depth_bottleneck, [1, 1], stride=1, scope="conv1")
        residual = resnet_utils.conv2d_same(residual, depth_bottleneck, 3, stride, rate=rate, scope="conv2")
        residual = slim.conv2d(
            residual, depth, [1, 1], stride=1, normalizer_fn=None, activation_fn=None, scope="conv3"
        )
        return slim.utils.collect_named_outputs(outputs_collections, unit_scope.name, shortcut + residual)


def _postnorm(net: tf.Tensor) -> tf.Tensor:
    """The batch norm + ReLU that pre-activation units leave to the end of the network."""
    return slim.batch_norm(net, activation_fn=tf.nn.relu, scope="postnorm")


_BOTTLENECK_V2 = ResnetVariant(
    default_scope="resnet_v2",
    unit_fns=(bottleneck,),
    root_conv_options={"activation_fn": None, "normalizer_fn": None},
    post_blocks=_postnorm,
)


def resnet_v2(
    inputs: tf.Tensor,
    blocks: Sequence[resnet_utils.Block],
    num_classes: Optional[int] = None,
    is_training: Optional[bool] = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    include_root_block: bool = True,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: Optional[str] = None,
) -> tuple:
    """Generate a pre-activation ResNet of ``blocks``; arguments and result as ``resnet_v1.resnet_v1``.

    Args:
        inputs: [batch, height, width, channels]; without the root block, the output of a
            convolution without activation.
        blocks: the :class:`nets.resnet_utils.Block` descriptions.
        num_classes: logits width; 0 or None returns the features before the logits layer.
        is_training: batch-norm mode; None leaves it to an enclosing ``slim.arg_scope``.
        global_pool: average the final features over space.
        output_stride: input/output resolution ratio (atrous convolution past it); None: nominal.
        include_root_block: build ``conv1`` and ``pool1``.
        spatial_squeeze: logits ``[batch, num_classes]`` instead of ``[batch, 1, 1, num_classes]``.
        reuse: reuse the variables of ``scope``.
        scope: variable scope (default ``resnet_v2``).

    Returns:
        ``(net, end_points)``: logits or features, and the activations by name.

    Raises:
        ValueError: if ``output_stride`` cannot be reached or the arguments are malformed.
    """
    options = ResnetOptions(
        num_classes, is_training, global_pool, output_stride, include_root_block, spatial_squeeze,
        reuse=reuse, scope=scope,
    )
    return build_resnet(inputs, blocks, _BOTTLENECK_V2, options)


resnet_v2.default_image_size = 224


def resnet_v2_block(scope: str, base_depth: int, num_units: int, stride: int) -> resnet_utils.Block:
    """A block of ``num_units`` v2 bottleneck units of output depth ``4 * base_depth``, strided in the last one."""
    return bottleneck_block(bottleneck, scope, base_depth, num_units, stride)


def _bottleneck_resnet_v2(layers: int, inputs, num_classes, is_training, global_pool, output_stride,
                          spatial_squeeze, reuse, scope) -> tuple:
    return resnet_v2(
        inputs, bottleneck_blocks(resnet_v2_block, layers), num_classes, is_training=is_training,
        global_pool=global_pool, output_stride=output_stride, include_root_block=True,
        spatial_squeeze=spatial_squeeze, reuse=reuse, scope=scope,
    )


def resnet_v2_50(
    inputs: tf.Tensor,
    num_classes: Optional[int] = None,
    is_training: Optional[bool] = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v2_50",
) -> tuple:
    """ResNet-50 v2. See :func:`resnet_v2` for the arguments and the return value."""
    return _bottleneck_resnet_v2(50, inputs, num_classes, is_training, global_pool, output_stride,
                                 spatial_squeeze, reuse, scope)


def resnet_v2_101(
    inputs: tf.Tensor,
    num_classes: Optional[int] = None,
    is_training: Optional[bool] = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v2_101",
) -> tuple:
    """ResNet-101 v2. See :func:`resnet_v2`."""
    return _bottleneck_resnet_v2(101, inputs, num_classes, is_training, global_pool, output_stride,
                                 spatial_squeeze, reuse, scope)


def resnet_v2_152(
    inputs: tf.Tensor,
    num_classes: Optional[int] = None,
    is_training: Optional[bool] = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v2_152",
) -> tuple:
    """ResNet-152 v2. See :func:`resnet_v2`."""
    return _bottleneck_resnet_v2(152, inputs, num_classes, is_training, global_pool, output_stride,
                                 spatial_squeeze, reuse, scope)


def resnet_v2_200(
    inputs: tf.Tensor,
    num_classes: Optional[int] = None,
    is_training: Optional[bool] = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v2_200",
) -> tuple:
    """ResNet-200 v2. See :func:`resnet_v2`."""
    return _bottleneck_resnet_v2(200, inputs, num_classes, is_training, global_pool, output_stride,
                                 spatial_squeeze, reuse, scope)


for _network in (resnet_v2_50, resnet_v2_101, resnet_v2_152, resnet_v2_200):
    _network.default_image_size = resnet_v2.default_image_size
