"""The Inception v1 (GoogLeNet, Szegedy et al. 2014) layer table, shared by the image network and the video ones.

``inception_v1`` builds it with 2-D layers; I3D and S3D-G inflate every layer
to 3-D and keep its scope name, so image checkpoints can seed them. Pooling
windows are given as [time, height, width]; the image network uses the last two.
"""

import dataclasses
from typing import Tuple, Union


@dataclasses.dataclass(frozen=True)
class StemConv:
    """The first, stride-2 7x7 convolution."""

    depth: int


@dataclasses.dataclass(frozen=True)
class PointwiseConv:
    """A 1x1 convolution."""

    depth: int


@dataclasses.dataclass(frozen=True)
class SpatiotemporalConv:
    """A 3x3 convolution (in video networks its temporal extent, 1 or 3, depends on the options)."""

    depth: int


@dataclasses.dataclass(frozen=True)
class MaxPool:
    """A SAME-padded max pooling; ``kernel`` and ``stride`` are [time, height, width]."""

    kernel: Tuple[int, int, int]
    stride: Tuple[int, int, int]


@dataclasses.dataclass(frozen=True)
class MixedDepths:
    """Output depths of the four branches of an Inception block (``*_reduce``: the 1x1 before a 3x3)."""

    branch_0: int
    branch_1_reduce: int
    branch_1: int
    branch_2_reduce: int
    branch_2: int
    branch_3: int


Layer = Union[StemConv, PointwiseConv, SpatiotemporalConv, MaxPool, MixedDepths]

INCEPTION_V1_LAYERS: Tuple[Tuple[str, Layer], ...] = (
    ("Conv2d_1a_7x7", StemConv(64)),
    ("MaxPool_2a_3x3", MaxPool((1, 3, 3), (1, 2, 2))),
    ("Conv2d_2b_1x1", PointwiseConv(64)),
    ("Conv2d_2c_3x3", SpatiotemporalConv(192)),
    ("MaxPool_3a_3x3", MaxPool((1, 3, 3), (1, 2, 2))),
    ("Mixed_3b", MixedDepths(64, 96, 128, 16, 32, 32)),
    ("Mixed_3c", MixedDepths(128, 128, 192, 32, 96, 64)),
    ("MaxPool_4a_3x3", MaxPool((3, 3, 3), (2, 2, 2))),
    ("Mixed_4b", MixedDepths(192, 96, 208, 16, 48, 64)),
    ("Mixed_4c", MixedDepths(160, 112, 224, 24, 64, 64)),
    ("Mixed_4d", MixedDepths(128, 128, 256, 24, 64, 64)),
    ("Mixed_4e", MixedDepths(112, 144, 288, 32, 64, 64)),
    ("Mixed_4f", MixedDepths(256, 160, 320, 32, 128, 128)),
    ("MaxPool_5a_2x2", MaxPool((2, 2, 2), (2, 2, 2))),
    ("Mixed_5b", MixedDepths(256, 160, 320, 32, 128, 128)),
    ("Mixed_5c", MixedDepths(384, 192, 384, 48, 128, 128)),
)
END_POINT_NAMES = tuple(name for name, _ in INCEPTION_V1_LAYERS)
# The stem before the first Inception block (``include_root_block=False`` leaves it out).
ROOT_BLOCK = END_POINT_NAMES[: END_POINT_NAMES.index("Mixed_3b")]
