"""Operations and cells of NASNet, at the official path ``nets.nasnet.nasnet_utils``.

The functions taking ``data_format`` read it from the enclosing ``slim.arg_scope`` when it is
not passed (every NASNet/PNASNet build sets it from its configuration). A cell object is
called like a layer: ``cell(net, scope=..., filter_scaling=..., stride=..., prev_layer=...,
cell_num=..., current_step=...)``.
"""

from nets._impl import nasnet_cells
from nets._impl.nasnet_cells import (  # noqa: F401  (the official public names of this module)
    CLIP_BY_VALUE_CAP,
    DATA_FORMAT_NCHW,
    DATA_FORMAT_NHWC,
    INVALID,
    NasNetABaseCell,
    calc_reduction_layers,
    drop_path,
    factorized_reduction,
    get_channel_dim,
    get_channel_index,
    global_avg_pool,
)


class NasNetANormalCell(nasnet_cells.FixedTopologyCell):
    """The NASNet-A normal cell (keeps the resolution); arguments as ``NasNetABaseCell`` without the topology."""

    OPERATIONS = (
        "separable_5x5_2",
        "separable_3x3_2",
        "separable_5x5_2",
        "separable_3x3_2",
        "avg_pool_3x3",
        "none",
        "avg_pool_3x3",
        "avg_pool_3x3",
        "separable_3x3_2",
        "none",
    )
    USED_HIDDENSTATES = (1, 0, 0, 0, 0, 0, 0)
    HIDDENSTATE_INDICES = (0, 1, 1, 1, 0, 1, 1, 1, 0, 0)


class NasNetAReductionCell(nasnet_cells.FixedTopologyCell):
    """The NASNet-A reduction cell (called with stride 2; also the ImageNet stem cell)."""

    OPERATIONS = (
        "separable_5x5_2",
        "separable_7x7_2",
        "max_pool_3x3",
        "separable_7x7_2",
        "avg_pool_3x3",
        "separable_5x5_2",
        "none",
        "avg_pool_3x3",
        "separable_3x3_2",
        "max_pool_3x3",
    )
    USED_HIDDENSTATES = (1, 1, 1, 0, 0, 0, 0)
    HIDDENSTATE_INDICES = (0, 1, 0, 1, 0, 1, 3, 2, 2, 0)
