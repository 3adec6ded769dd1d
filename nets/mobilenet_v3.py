"""MobileNet v3 (Howard et al., 2019) and MobileNet-EdgeTPU with the official scopes.

v3 adds squeeze-excite gates, 5x5 depthwise kernels and hard-swish to the
MobileNet v2 block, and ends with a global pool followed by a 1x1 convolution
without batch norm (scope ``Conv_2``) before the classifier. The
"minimalistic" variants drop squeeze-excite, hard-swish and 5x5 kernels.
MobileNet-EdgeTPU (scope ``MobilenetEdgeTPU``) uses ReLU only and "fused"
blocks (one full 3x3 expansion convolution instead of 1x1 + depthwise) in its
early stages, which run faster on the Edge TPU.
"""

import dataclasses
from typing import Sequence, Tuple

import tensorflow as tf

from nets.mobilenet_blocks import (
    Activation,
    ConvLayer,
    GlobalPool,
    InvertedResidual,
    Layer,
    hard_swish,
    mobilenet_arg_scope,
    network_function,
)


def _block(
    kernel_size: int,
    expansion: float,
    depth: int,
    stride: int = 1,
    activation: Activation = tf.nn.relu,
    se: bool = False,
) -> InvertedResidual:
    """One table row of a v3 network: kernel, expansion factor, output depth, stride, activation, squeeze-excite."""
    return InvertedResidual(
        depth, activation, expansion=expansion, kernel_size=kernel_size, stride=stride, squeeze_excite=se
    )


def _fused(expansion: float, depth: int, stride: int = 1) -> InvertedResidual:
    """One fused 3x3 EdgeTPU block with ReLU."""
    return InvertedResidual(depth, tf.nn.relu, expansion=expansion, kernel_size=3, stride=stride, fused=True)


MOBILENET_V3_LARGE_LAYERS: Tuple[Layer, ...] = (
    ConvLayer(16, hard_swish, kernel_size=3, stride=2),
    _block(3, 1, 16),
    _block(3, 4, 24, stride=2),
    _block(3, 3, 24),
    _block(5, 3, 40, stride=2, se=True),
    _block(5, 3, 40, se=True),
    _block(5, 3, 40, se=True),
    _block(3, 6, 80, stride=2, activation=hard_swish),
    _block(3, 2.5, 80, activation=hard_swish),
    _block(3, 184 / 80, 80, activation=hard_swish),
    _block(3, 184 / 80, 80, activation=hard_swish),
    _block(3, 6, 112, activation=hard_swish, se=True),
    _block(3, 6, 112, activation=hard_swish, se=True),
    _block(5, 6, 160, stride=2, activation=hard_swish, se=True),
    _block(5, 6, 160, activation=hard_swish, se=True),
    _block(5, 6, 160, activation=hard_swish, se=True),
    ConvLayer(960, hard_swish),
    GlobalPool(),
    ConvLayer(1280, hard_swish, batch_norm=False),
)

MOBILENET_V3_SMALL_LAYERS: Tuple[Layer, ...] = (
    ConvLayer(16, hard_swish, kernel_size=3, stride=2),
    _block(3, 1, 16, stride=2, se=True),
    _block(3, 72 / 16, 24, stride=2),
    _block(3, 88 / 24, 24),
    _block(5, 4, 40, stride=2, activation=hard_swish, se=True),
    _block(5, 6, 40, activation=hard_swish, se=True),
    _block(5, 6, 40, activation=hard_swish, se=True),
    _block(5, 3, 48, activation=hard_swish, se=True),
    _block(5, 3, 48, activation=hard_swish, se=True),
    _block(5, 6, 96, stride=2, activation=hard_swish, se=True),
    _block(5, 6, 96, activation=hard_swish, se=True),
    _block(5, 6, 96, activation=hard_swish, se=True),
    ConvLayer(576, hard_swish),
    GlobalPool(),
    ConvLayer(1024, hard_swish, batch_norm=False),
)

MOBILENET_EDGETPU_LAYERS: Tuple[Layer, ...] = (
    ConvLayer(32, tf.nn.relu, kernel_size=3, stride=2),
    _fused(1, 16),
    _fused(8, 32, stride=2),
    _fused(4, 32),
    _fused(4, 32),
    _fused(4, 32),
    _fused(8, 48, stride=2),
    _fused(4, 48),
    _fused(4, 48),
    _fused(4, 48),
    _block(3, 8, 96, stride=2),
    _block(3, 4, 96),
    _block(3, 4, 96),
    _block(3, 4, 96),
    InvertedResidual(96, tf.nn.relu, expansion=8, kernel_size=3, residual=False),  # official: no shortcut here
    _block(3, 4, 96),
    _block(3, 4, 96),
    _block(3, 4, 96),
    _block(5, 8, 160, stride=2),
    _block(5, 4, 160),
    _block(5, 4, 160),
    _block(5, 4, 160),
    _block(3, 8, 192),
    ConvLayer(1280, tf.nn.relu),
)


def minimalistic(layers: Sequence[Layer]) -> Tuple[Layer, ...]:
    """The "minimalistic" form of a v3 table: ReLU everywhere, no squeeze-excite, depthwise kernels at most 3x3."""
    simplified = []
    for layer in layers:
        if isinstance(layer, InvertedResidual):
            layer = dataclasses.replace(layer, activation=tf.nn.relu, squeeze_excite=False, kernel_size=3)
        elif isinstance(layer, ConvLayer):
            layer = dataclasses.replace(layer, activation=tf.nn.relu)
        simplified.append(layer)
    return tuple(simplified)


mobilenet_v3_large = network_function("mobilenet_v3_large", MOBILENET_V3_LARGE_LAYERS, "MobilenetV3")
mobilenet_v3_small = network_function("mobilenet_v3_small", MOBILENET_V3_SMALL_LAYERS, "MobilenetV3")
mobilenet_v3_large_minimalistic = network_function(
    "mobilenet_v3_large_minimalistic", minimalistic(MOBILENET_V3_LARGE_LAYERS), "MobilenetV3"
)
mobilenet_v3_small_minimalistic = network_function(
    "mobilenet_v3_small_minimalistic", minimalistic(MOBILENET_V3_SMALL_LAYERS), "MobilenetV3"
)
mobilenet_edgetpu = network_function("mobilenet_edgetpu", MOBILENET_EDGETPU_LAYERS, "MobilenetEdgeTPU")
mobilenet_edgetpu_075 = network_function(
    "mobilenet_edgetpu_075",
    MOBILENET_EDGETPU_LAYERS,
    "MobilenetEdgeTPU",
    default_depth_multiplier=0.75,
    default_finegrain=True,
)

mobilenet_v3_arg_scope = mobilenet_arg_scope
