"""The ResNet network generator shared by ``resnet_v1``, ``resnet_v2`` and the basic-block ResNets.

All three build: an optional root (7x7/2 convolution ``conv1`` and 3x3/2 max pool ``pool1``), the
blocks through ``resnet_utils.stack_blocks_dense``, an optional global average pool ``pool5`` and a
1x1 convolution ``logits``; they differ in the root convolution, the residual unit, and v2's final
``postnorm``. End points are named as in the official ResNets.
"""

import dataclasses
import numbers
from typing import Callable, Optional, Sequence

import tensorflow as tf
import tf_slim as slim

from nets import resnet_utils

ROOT_STRIDE = 4  # conv1 (stride 2) followed by pool1 (stride 2).


@dataclasses.dataclass(frozen=True)
class ResnetVariant:
    """What distinguishes one ResNet family from another in the shared generator.

    ``unit_fns`` are the arg-scoped residual units whose outputs become end points;
    ``root_conv_options`` override the conv arg_scope for ``conv1`` (v2 has no BN/ReLU there);
    ``post_blocks`` runs on the blocks' output before pooling (v2's ``postnorm``).
    """

    default_scope: str
    unit_fns: tuple
    root_conv_options: dict = dataclasses.field(default_factory=dict)
    post_blocks: Optional[Callable[[tf.Tensor], tf.Tensor]] = None


@dataclasses.dataclass(frozen=True)
class ResnetOptions:
    """The user-facing arguments of a ResNet generator call (``resnet_v1(...)``'s keywords)."""

    num_classes: Optional[int] = None
    is_training: Optional[bool] = True
    global_pool: bool = True
    output_stride: Optional[int] = None
    include_root_block: bool = True
    spatial_squeeze: bool = True
    store_non_strided_activations: bool = False
    reuse: Optional[bool] = None
    scope: Optional[str] = None


def _check(inputs: tf.Tensor, options: ResnetOptions) -> Optional[int]:
    """Validate ``inputs`` and the options; return the output stride the blocks must reach."""
    rank = inputs.get_shape().rank
    if rank is not None and rank != 4:
        raise ValueError(
            f"inputs must be a 4-D [batch, height, width, channels] tensor, got shape {inputs.get_shape()}; "
            "add the missing batch or channel dimension."
        )
    num_classes = options.num_classes
    if num_classes is not None and (not isinstance(num_classes, numbers.Integral) or num_classes < 0):
        raise ValueError(f"num_classes must be a non-negative int, 0 or None, got {num_classes!r}.")
    output_stride = options.output_stride
    if output_stride is None or not options.include_root_block:
        return output_stride
    if output_stride % ROOT_STRIDE != 0:
        raise ValueError(f"The output_stride needs to be a multiple of 4, got {output_stride!r}.")
    return int(output_stride) // ROOT_STRIDE


class NoOpScope:
    """A context manager that does nothing: with ``is_training=None`` an enclosing arg_scope decides."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc_value, traceback) -> bool:
        return False


def _training_mode(is_training: Optional[bool]):
    """Batch norm's ``is_training`` for the network, or ``NoOpScope()`` when it is None."""
    if is_training is None:
        return NoOpScope()
    return slim.arg_scope([slim.batch_norm], is_training=is_training)


def build_resnet(
    inputs: tf.Tensor, blocks: Sequence[resnet_utils.Block], variant: ResnetVariant, options: ResnetOptions
) -> tuple:
    """Build a ResNet of ``blocks``; return ``(net, end_points)`` as the official generators do.

    ``net`` is the logits (``[batch, num_classes]`` when squeezed), or with ``num_classes`` 0 or
    None the last block's output, globally pooled when ``global_pool``.
    """
    blocks_output_stride = _check(inputs, options)
    with tf.compat.v1.variable_scope(options.scope, variant.default_scope, [inputs], reuse=options.reuse) as scope:
        collection = scope.original_name_scope + "_end_points"
        with slim.arg_scope(
            [slim.conv2d, resnet_utils.stack_blocks_dense, *variant.unit_fns], outputs_collections=collection
        ), _training_mode(options.is_training):
            net = inputs
            if options.include_root_block:
                with slim.arg_scope([slim.conv2d], **variant.root_conv_options):
                    net = resnet_utils.conv2d_same(net, 64, 7, stride=2, scope="conv1")
                net = slim.max_pool2d(net, [3, 3], stride=2, scope="pool1")
            net = resnet_utils.stack_blocks_dense(
                net, blocks, blocks_output_stride, options.store_non_strided_activations
            )
            if variant.post_blocks is not None:
                net = variant.post_blocks(net)
            end_points = slim.utils.convert_collection_to_dict(collection)
            if options.global_pool:
                net = tf.reduce_mean(net, [1, 2], keepdims=True, name="pool5")
                end_points["global_pool"] = net
            if options.num_classes:
                net = slim.conv2d(
                    net, options.num_classes, [1, 1], activation_fn=None, normalizer_fn=None, scope="logits"
                )
                end_points[scope.name + "/logits"] = net
                if options.spatial_squeeze:
                    net = tf.squeeze(net, [1, 2], name="SpatialSqueeze")
                    end_points[scope.name + "/spatial_squeeze"] = net
                end_points["predictions"] = slim.softmax(net, scope="predictions")
            return net, end_points


def bottleneck_base_depth(depth: int, min_base_depth: int, depth_multiplier: float) -> int:
    """A block's bottleneck width: ``depth`` scaled by ``depth_multiplier``, never below ``min_base_depth``."""
    if depth_multiplier < 0:
        raise ValueError(f"depth_multiplier={depth_multiplier} must be zero or greater.")
    return max(int(depth * depth_multiplier), min_base_depth)


# Units per block of the bottleneck ResNets, block widths and strides (He et al. 2015, Table 1;
# ResNet-200 from He et al. 2016).
BOTTLENECK_UNITS = {
    50: (3, 4, 6, 3),
    101: (3, 4, 23, 3),
    152: (3, 8, 36, 3),
    200: (3, 24, 36, 3),
}
BLOCK_BASE_DEPTHS = (64, 128, 256, 512)
BLOCK_STRIDES = (2, 2, 2, 1)


def bottleneck_blocks(
    block_fn: Callable, layers: int, min_base_depth: int = 8, depth_multiplier: float = 1
) -> list:
    """``block1..block4`` of the ``layers``-deep bottleneck ResNet.

    Each is made by ``block_fn(scope, base_depth, num_units, stride)``.
    """
    return [
        block_fn(
            f"block{index + 1}",
            base_depth=bottleneck_base_depth(base_depth, min_base_depth, depth_multiplier),
            num_units=num_units,
            stride=stride,
        )
        for index, (base_depth, num_units, stride) in enumerate(
            zip(BLOCK_BASE_DEPTHS, BOTTLENECK_UNITS[layers], BLOCK_STRIDES)
        )
    ]


def bottleneck_block(unit_fn: Callable, scope: str, base_depth: int, num_units: int, stride: int) -> resnet_utils.Block:
    """A block of ``num_units`` bottleneck units (output depth ``4 * base_depth``), strided in its last unit."""
    unit = {"depth": base_depth * 4, "depth_bottleneck": base_depth}
    return resnet_utils.Block(scope, unit_fn, [dict(unit, stride=1)] * (num_units - 1) + [dict(unit, stride=stride)])
