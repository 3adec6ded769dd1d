"""The basic residual unit and blocks of ResNet-18 and ResNet-34 (He et al. 2016, Table 1).

Official TF-Slim ships only the bottleneck ResNets (50 layers and up); ``nets.resnet_v1`` builds
these two with the same generator, so they share its layout: blocks ``block1..block4`` of units
``unit_N``, each a ``basic_block`` with ``conv1``, ``conv2`` and, where the depth changes, a
``shortcut`` projection; the block stride is carried by the block's last unit.
"""

from typing import Optional

import tensorflow as tf
import tf_slim as slim

from nets import resnet_utils

STAGE_DEPTHS = (64, 128, 256, 512)
STAGE_STRIDES = (2, 2, 2, 1)
UNITS_PER_STAGE = {
    18: (2, 2, 2, 2),
    34: (3, 4, 6, 3),
}


def _shortcut(inputs: tf.Tensor, depth: int, stride: int) -> tf.Tensor:
    """Identity (subsampled by ``stride``) when the depth is kept, else a 1x1 projection with BN."""
    depth_in = slim.utils.last_dimension(inputs.get_shape(), min_rank=4)
    if depth_in == depth:
        return resnet_utils.subsample(inputs, stride, "shortcut")
    return slim.conv2d(inputs, depth, [1, 1], stride=stride, activation_fn=None, scope="shortcut")


@slim.add_arg_scope
def basic_block(
    inputs: tf.Tensor,
    depth: int,
    stride: int,
    rate: int = 1,
    outputs_collections: Optional[str] = None,
    scope: Optional[str] = None,
) -> tf.Tensor:
    """Basic residual unit, ``relu(shortcut(x) + conv2(conv1(x)))``, with BN after each convolution.

    ``conv1`` (3x3) carries the stride, ``conv2`` (3x3) has no activation before
    the sum; ``rate`` dilates both for ``output_stride`` control.
    """
    with tf.compat.v1.variable_scope(scope, "basic_block", [inputs]) as unit_scope:
        shortcut = _shortcut(inputs, depth, stride)
        residual = resnet_utils.conv2d_same(inputs, depth, 3, stride, rate=rate, scope="conv1")
        residual = slim.conv2d(residual, depth, [3, 3], rate=rate, activation_fn=None, scope="conv2")
        output = tf.nn.relu(shortcut + residual)
        return slim.utils.collect_named_outputs(outputs_collections, unit_scope.name, output)


def basic_stage(scope: str, depth: int, num_units: int, stride: int) -> resnet_utils.Block:
    """A block of ``num_units`` basic units of ``depth`` channels; only the last unit is strided."""
    units = [{"depth": depth, "stride": 1}] * (num_units - 1) + [{"depth": depth, "stride": stride}]
    return resnet_utils.Block(scope, basic_block, units)


def basic_blocks(layers: int) -> list:
    """The four blocks ``block1..block4`` of the ``layers``-deep basic ResNet (18 or 34)."""
    return [
        basic_stage(f"block{index + 1}", depth, num_units, stride)
        for index, (depth, num_units, stride) in enumerate(zip(STAGE_DEPTHS, UNITS_PER_STAGE[layers], STAGE_STRIDES))
    ]
