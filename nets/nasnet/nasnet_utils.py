"""Operations and cells of NASNet, at the official path ``nets.nasnet.nasnet_utils``.

The functions taking ``data_format`` read it from the enclosing ``slim.arg_scope`` when it is
not passed (every NASNet/PNASNet build sets it from its configuration). A cell object is
called like a layer: ``cell(net, scope=..., filter_scaling=..., stride=..., prev_layer=...,
cell_num=..., current_step=...)``.
"""

from typing import Optional, Sequence

import tensorflow as tf

from nets._impl import nasnet_cells
from nets._impl.nasnet_cells import (  # noqa: F401  (the official public names of this module)
    CLIP_BY_VALUE_CAP,
    DATA_FORMAT_NCHW,
    DATA_FORMAT_NHWC,
    INVALID,
    calc_reduction_layers,
    drop_path,
    factorized_reduction,
    get_channel_dim,
    get_channel_index,
    global_avg_pool,
)


class NasNetABaseCell:
    """A searched cell, described as in the official code.

    Args:
        num_conv_filters: filters of every convolution at ``filter_scaling`` 1.
        operations: the ten branch operations in order, e.g. ``'separable_5x5_2'``,
            ``'avg_pool_3x3'``, ``'max_pool_3x3'``, ``'none'``.
        used_hiddenstates: one 0/1 flag per state (the two inputs and the five step
            outputs); flagged states are consumed inside the cell and left out of its output.
        hiddenstate_indices: the state each branch reads.
        drop_path_keep_prob: keep probability of the deepest cell at the end of training (1.0: no drop-path).
        total_num_cells: cells of the whole network (stem cells included), for the depth scaling of drop-path.
        total_training_steps: steps over which drop-path ramps up to its full rate.
        use_bounded_activation: ReLU6 instead of ReLU and branch outputs clipped to [-6, 6].

    Raises:
        ValueError: an operation name or index does not describe a cell.
    """

    def __init__(
        self,
        num_conv_filters: int,
        operations: Sequence[str],
        used_hiddenstates: Sequence[int],
        hiddenstate_indices: Sequence[int],
        drop_path_keep_prob: float,
        total_num_cells: int,
        total_training_steps: int,
        use_bounded_activation: bool = False,
    ) -> None:
        self._spec = nasnet_cells.cell_spec_from_official(operations, used_hiddenstates, hiddenstate_indices)
        self._num_conv_filters = num_conv_filters
        self._drop_path_keep_prob = drop_path_keep_prob
        self._total_num_cells = total_num_cells
        self._total_training_steps = total_training_steps
        self._use_bounded_activation = use_bounded_activation

    def __call__(
        self,
        net: tf.Tensor,
        scope: Optional[str] = None,
        filter_scaling: float = 1,
        stride: int = 1,
        prev_layer: Optional[tf.Tensor] = None,
        cell_num: int = -1,
        current_step: Optional[tf.Tensor] = None,
    ) -> tf.Tensor:
        """Build the cell on ``net`` (and ``prev_layer``, the output before it) under ``scope``.

        ``cell_num`` is the cell's depth in the network (needed with drop-path);
        ``current_step`` drives the drop-path schedule (the global step when None).
        """
        if self._drop_path_keep_prob < 1.0 and cell_num < 0:
            raise ValueError("cell_num must be the cell's depth (>= 0) when drop_path_keep_prob < 1.")
        schedule = nasnet_cells.DropPathSchedule(
            self._drop_path_keep_prob, self._total_num_cells, self._total_training_steps, current_step
        )
        return nasnet_cells.build_cell(
            net,
            prev_layer,
            self._spec,
            scope=scope,
            num_filters=int(self._num_conv_filters * filter_scaling),
            stride=stride,
            cell_index=cell_num,
            drop_path_schedule=schedule,
            use_bounded_activation=self._use_bounded_activation,
        )


class NasNetANormalCell(NasNetABaseCell):
    """The NASNet-A normal cell (keeps the resolution)."""

    def __init__(
        self,
        num_conv_filters: int,
        drop_path_keep_prob: float,
        total_num_cells: int,
        total_training_steps: int,
        use_bounded_activation: bool = False,
    ) -> None:
        super().__init__(
            num_conv_filters,
            operations=[
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
            ],
            used_hiddenstates=[1, 0, 0, 0, 0, 0, 0],
            hiddenstate_indices=[0, 1, 1, 1, 0, 1, 1, 1, 0, 0],
            drop_path_keep_prob=drop_path_keep_prob,
            total_num_cells=total_num_cells,
            total_training_steps=total_training_steps,
            use_bounded_activation=use_bounded_activation,
        )


class NasNetAReductionCell(NasNetABaseCell):
    """The NASNet-A reduction cell (called with stride 2; also the ImageNet stem cell)."""

    def __init__(
        self,
        num_conv_filters: int,
        drop_path_keep_prob: float,
        total_num_cells: int,
        total_training_steps: int,
        use_bounded_activation: bool = False,
    ) -> None:
        super().__init__(
            num_conv_filters,
            operations=[
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
            ],
            used_hiddenstates=[1, 1, 1, 0, 0, 0, 0],
            hiddenstate_indices=[0, 1, 0, 1, 0, 1, 3, 2, 2, 0],
            drop_path_keep_prob=drop_path_keep_prob,
            total_num_cells=total_num_cells,
            total_training_steps=total_training_steps,
            use_bounded_activation=use_bounded_activation,
        )
