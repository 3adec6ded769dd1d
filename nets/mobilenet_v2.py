"""MobileNet v2 (Sandler et al., 2018) with the official ``MobilenetV2`` scopes and its width variants.

A 3x3 stem, 17 inverted-residual blocks with ReLU6 and linear bottlenecks,
a 1x1 convolution to 1280 channels, then the shared pooled 1x1 classifier.
``mobilenet_v2_140`` scales every depth by 1.4; ``mobilenet_v2_035`` by 0.35
with the last layer kept at 1280 (finegrain classification mode), as the
official checkpoints were trained.
"""

from typing import List, Tuple

import tensorflow as tf

from nets.mobilenet_blocks import ConvLayer, InvertedResidual, Layer, mobilenet_arg_scope, network_function

# (expansion t, output depth c, repeats n, first stride s): Table 2 of the MobileNet v2 paper.
_STAGES = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def _blocks(stages: Tuple[Tuple[int, int, int, int], ...]) -> List[Layer]:
    """Expand the (t, c, n, s) stage rows into blocks; only the first block of a stage strides."""
    blocks: List[Layer] = []
    for expansion, depth, repeats, stride in stages:
        for repeat in range(repeats):
            block_stride = stride if repeat == 0 else 1
            blocks.append(InvertedResidual(depth, tf.nn.relu6, expansion=expansion, stride=block_stride))
    return blocks


MOBILENET_V2_LAYERS: Tuple[Layer, ...] = (
    ConvLayer(32, tf.nn.relu6, kernel_size=3, stride=2),
    *_blocks(_STAGES),
    ConvLayer(1280, tf.nn.relu6),
)

mobilenet_v2 = network_function("mobilenet_v2", MOBILENET_V2_LAYERS, "MobilenetV2")
mobilenet_v2_140 = network_function(
    "mobilenet_v2_140", MOBILENET_V2_LAYERS, "MobilenetV2", default_depth_multiplier=1.4
)
mobilenet_v2_035 = network_function(
    "mobilenet_v2_035",
    MOBILENET_V2_LAYERS,
    "MobilenetV2",
    default_depth_multiplier=0.35,
    default_finegrain=True,
)

mobilenet_v2_arg_scope = mobilenet_arg_scope
