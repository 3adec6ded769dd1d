"""The searched cells of NASNet-A and PNASNet-5, with drop-path and factorized reduction.

A cell starts from two hidden states: its input (projected by a 1x1 convolution) and
the output of the layer before it. Five steps each transform two existing states with
searched operations and add the results, appending the sum as a new state. The cell
outputs the channel concatenation of every state its spec does not exclude. Variable
scopes follow the official checkpoints (``comb_iter_<step>/<left|right>/...``).

Both tensor layouts are supported: the functions with a ``data_format`` argument take it
from the enclosing ``slim.arg_scope`` (the networks set it from their configuration), as
in the official ``nasnet_utils``, and the cell machinery asks them for channel axes.
``NasNetABaseCell`` is the official cell object over ``build_cell``; ``nets.nasnet.nasnet_utils``
re-exports the official names defined here.
"""

import dataclasses
from typing import Callable, List, Optional, Sequence, Tuple, Union

import tensorflow as tf
import tf_slim as slim

NUM_STEPS = 5
_NUM_INPUT_STATES = 2
DATA_FORMAT_NHWC = "NHWC"
DATA_FORMAT_NCHW = "NCHW"
INVALID = "null"
# With bounded activations, branch outputs are clipped to [-6, 6], the range of ReLU6.
CLIP_BY_VALUE_CAP = 6


@dataclasses.dataclass(frozen=True)
class SeparableStack:
    """``num_layers`` rounds of ReLU, depthwise-separable convolution and batch norm."""

    kernel_size: int
    num_layers: int = 2


@dataclasses.dataclass(frozen=True)
class Pooling:
    """Average or max pooling with SAME padding; a 1x1 projection follows if the width must change."""

    kind: str
    size: int = 3

    def __post_init__(self) -> None:
        if self.kind not in ("avg", "max"):
            raise ValueError(f"Pooling kind must be 'avg' or 'max', got {self.kind!r}.")


@dataclasses.dataclass(frozen=True)
class Identity:
    """The state itself, or a 1x1 projection when the stride or the width must change."""


Operation = Union[SeparableStack, Pooling, Identity]


@dataclasses.dataclass(frozen=True)
class CellSpec:
    """A searched cell topology.

    Step ``i`` adds ``operations[2i](states[inputs[2i]])`` and
    ``operations[2i+1](states[inputs[2i+1]])``. States 0 and 1 are the projected cell
    input and the previous layer; states ``excluded_states`` are left out of the output.
    """

    operations: Tuple[Operation, ...]
    inputs: Tuple[int, ...]
    excluded_states: Tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.operations) != 2 * NUM_STEPS or len(self.inputs) != 2 * NUM_STEPS:
            raise ValueError(f"CellSpec needs {2 * NUM_STEPS} operations and {2 * NUM_STEPS} inputs, one per branch.")
        for position, state in enumerate(self.inputs):
            if not 0 <= state < _NUM_INPUT_STATES + position // 2:
                raise ValueError(
                    f"CellSpec inputs[{position}]={state} refers to a state not built yet; use an earlier one."
                )
        for operation in self.operations:
            if not isinstance(operation, (SeparableStack, Pooling, Identity)):
                raise TypeError(f"CellSpec operations must be SeparableStack, Pooling or Identity, got {operation!r}.")


def _square_kernel(size: str, operation: str) -> int:
    """The side of a ``KxK`` kernel written in an operation name."""
    height, _, width = size.partition("x")
    if not (height.isdigit() and height == width):
        raise ValueError(f"Operation {operation!r} must name a square kernel such as '3x3'.")
    return int(height)


def operation_from_name(name: str) -> Operation:
    """The operation an official NASNet operation name stands for.

    ``'separable_5x5_2'`` (two separable layers; the count defaults to 1), ``'avg_pool_3x3'``,
    ``'max_pool_3x3'`` and ``'none'`` (the identity).
    """
    parts = name.split("_")
    if name == "none":
        return Identity()
    if parts[0] == "separable" and len(parts) == 2:
        return SeparableStack(kernel_size=_square_kernel(parts[1], name), num_layers=1)
    if parts[0] == "separable" and len(parts) == 3 and parts[2].isdigit():
        return SeparableStack(kernel_size=_square_kernel(parts[1], name), num_layers=int(parts[2]))
    if len(parts) == 3 and parts[0] in ("avg", "max") and parts[1] == "pool":
        return Pooling(parts[0], _square_kernel(parts[2], name))
    raise ValueError(
        f"Unknown NASNet operation {name!r}; use 'separable_KxK_N', 'avg_pool_KxK', 'max_pool_KxK' or 'none'."
    )


def cell_spec_from_official(
    operations: Sequence[str], used_hiddenstates: Sequence[int], hiddenstate_indices: Sequence[int]
) -> CellSpec:
    """A CellSpec from the official cell description (operation names, used-state flags, input indices)."""
    if len(used_hiddenstates) != _NUM_INPUT_STATES + NUM_STEPS:
        raise ValueError(
            f"used_hiddenstates needs {_NUM_INPUT_STATES + NUM_STEPS} flags (one per state), "
            f"got {len(used_hiddenstates)}."
        )
    return CellSpec(
        operations=tuple(operation_from_name(name) for name in operations),
        inputs=tuple(hiddenstate_indices),
        excluded_states=tuple(index for index, used in enumerate(used_hiddenstates) if used),
    )


def calc_reduction_layers(num_cells: int, num_reduction_layers: int) -> List[int]:
    """Cell numbers at which the resolution halves: evenly spaced through the ``num_cells`` cells."""
    return [int(pool / (num_reduction_layers + 1) * num_cells) for pool in range(1, num_reduction_layers + 1)]


def _check_data_format(data_format: str) -> None:
    if data_format not in (DATA_FORMAT_NHWC, DATA_FORMAT_NCHW):
        raise ValueError(
            f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}; pass it, or call inside the "
            "arg_scope of a NASNet build, which sets it from the configuration."
        )


@slim.add_arg_scope
def get_channel_index(data_format: str = INVALID) -> int:
    """The channel axis of a 4-D tensor in ``data_format``."""
    _check_data_format(data_format)
    return 3 if data_format == DATA_FORMAT_NHWC else 1


@slim.add_arg_scope
def get_channel_dim(shape: Sequence, data_format: str = INVALID) -> int:
    """The number of channels of a 4-D ``shape`` in ``data_format``."""
    if len(shape) != 4:
        raise ValueError(f"get_channel_dim needs a 4-D shape, got {list(shape)}.")
    return int(shape[get_channel_index(data_format=data_format)])


@slim.add_arg_scope
def global_avg_pool(x: tf.Tensor, data_format: str = INVALID) -> tf.Tensor:
    """Average away the spatial dimensions of the 4-D ``x``: ``[batch, channels]``."""
    _check_data_format(data_format)
    if x.shape.rank != 4:
        raise ValueError(f"global_avg_pool needs a 4-D tensor, got shape {x.shape}.")
    return tf.reduce_mean(x, [1, 2] if data_format == DATA_FORMAT_NHWC else [2, 3])


def spatial_shape(net: tf.Tensor) -> list:
    """Height and width of the 4-D ``net`` in the layout of the enclosing arg_scope."""
    shape = net.shape.as_list()
    return shape[1:3] if get_channel_index() == 3 else shape[2:4]


def _channels(net: tf.Tensor) -> int:
    return get_channel_dim(net.shape.as_list())


@slim.add_arg_scope
def factorized_reduction(net: tf.Tensor, output_filters: int, stride: int, data_format: str = INVALID) -> tf.Tensor:
    """Project ``net`` to ``output_filters`` channels, downsampling by ``stride`` without skipping pixels.

    A strided 1x1 convolution would never see the odd rows and columns, so at stride 2
    one half of the filters reads the even pixel grid and the other half the grid
    shifted by one pixel (zero-padded at the bottom-right edge).
    """
    _check_data_format(data_format)
    if stride == 1:
        net = slim.conv2d(net, output_filters, 1, scope="path_conv", data_format=data_format)
        return slim.batch_norm(net, scope="path_bn", data_format=data_format)
    if data_format == DATA_FORMAT_NHWC:
        even_grid = net[:, ::stride, ::stride, :]
        shifted = tf.pad(net[:, 1:, 1:, :], [[0, 0], [0, 1], [0, 1], [0, 0]])
        odd_grid = shifted[:, ::stride, ::stride, :]
    else:
        even_grid = net[:, :, ::stride, ::stride]
        shifted = tf.pad(net[:, :, 1:, 1:], [[0, 0], [0, 0], [0, 1], [0, 1]])
        odd_grid = shifted[:, :, ::stride, ::stride]
    even_filters = output_filters // 2
    even_path = slim.conv2d(even_grid, even_filters, 1, scope="path1_conv", data_format=data_format)
    odd_path = slim.conv2d(odd_grid, output_filters - even_filters, 1, scope="path2_conv", data_format=data_format)
    concatenated = tf.concat([even_path, odd_path], axis=get_channel_index(data_format=data_format))
    return slim.batch_norm(concatenated, scope="final_path_bn", data_format=data_format)


@slim.add_arg_scope
def drop_path(net: tf.Tensor, keep_prob: tf.Tensor, is_training: bool = True) -> tf.Tensor:
    """In training, zero each example with probability ``1 - keep_prob``, scaling the kept ones by ``1 / keep_prob``."""
    if not is_training:
        return net
    noise = tf.random.uniform([tf.shape(net)[0], 1, 1, 1], dtype=tf.float32)
    keep_mask = tf.floor(keep_prob + noise)
    return net * tf.cast(keep_mask / keep_prob, net.dtype)


@dataclasses.dataclass(frozen=True)
class DropPathSchedule:
    """Drop-path settings shared by all cells of one network.

    ``keep_prob`` is the keep probability of the deepest cell once training has run
    ``total_training_steps`` steps; 1.0 disables drop-path. ``current_step`` defaults to
    the global step, created where first needed as the official nets do.
    """

    keep_prob: float
    total_num_cells: int
    total_training_steps: int
    current_step: Optional[tf.Tensor] = None


def cell_keep_prob(schedule: DropPathSchedule, cell_index: int) -> tf.Tensor:
    """Keep probability of cell ``cell_index`` now; the drop rate grows linearly with depth and training progress."""
    depth_ratio = (cell_index + 1) / float(schedule.total_num_cells)
    keep_prob_at_depth = 1.0 - depth_ratio * (1.0 - schedule.keep_prob)
    step = schedule.current_step
    if step is None:
        step = tf.compat.v1.train.get_or_create_global_step()
    progress = tf.minimum(1.0, tf.cast(step, tf.float32) / float(schedule.total_training_steps))
    return 1.0 - progress * (1.0 - keep_prob_at_depth)


def activation(use_bounded_activation: bool) -> Callable[[tf.Tensor], tf.Tensor]:
    """ReLU6 with bounded activations (friendlier to quantized inference), else ReLU."""
    return tf.nn.relu6 if use_bounded_activation else tf.nn.relu


def _clip(net: tf.Tensor) -> tf.Tensor:
    return tf.clip_by_value(net, -CLIP_BY_VALUE_CAP, CLIP_BY_VALUE_CAP)


def _projection(net: tf.Tensor, num_filters: int, stride: int) -> tf.Tensor:
    net = slim.conv2d(net, num_filters, 1, stride=stride, scope="1x1")
    return slim.batch_norm(net, scope="bn_1")


def _separable_stack(
    net: tf.Tensor, operation: SeparableStack, num_filters: int, stride: int, bounded: bool
) -> tf.Tensor:
    size = operation.kernel_size
    for layer in range(1, operation.num_layers + 1):
        net = activation(bounded)(net)
        net = slim.separable_conv2d(
            net,
            num_filters,
            size,
            depth_multiplier=1,
            stride=stride if layer == 1 else 1,
            scope=f"separable_{size}x{size}_{layer}",
        )
        net = slim.batch_norm(net, scope=f"bn_sep_{size}x{size}_{layer}")
    return net


def _pooling(net: tf.Tensor, operation: Pooling, num_filters: int, stride: int, bounded: bool) -> tf.Tensor:
    if bounded:
        net = tf.nn.relu6(net)
    pool = slim.avg_pool2d if operation.kind == "avg" else slim.max_pool2d
    pooled = pool(net, operation.size, stride=stride, padding="SAME")
    if _channels(net) != num_filters:
        return _projection(pooled, num_filters, 1)
    return pooled


def _identity(net: tf.Tensor, num_filters: int, stride: int, bounded: bool) -> tf.Tensor:
    """The state, projected by a strided 1x1 convolution when the stride or the width must change."""
    if bounded:
        net = tf.nn.relu6(net)
    if stride == 1 and _channels(net) == num_filters:
        return net
    projected = _projection(net if bounded else tf.nn.relu(net), num_filters, stride)
    return _clip(projected) if bounded else projected


def _apply_operation(
    net: tf.Tensor,
    operation: Operation,
    num_filters: int,
    stride: int,
    schedule: DropPathSchedule,
    cell_index: int,
    bounded: bool,
) -> tf.Tensor:
    """One branch of a step; every operation but the identity is followed by drop-path."""
    if isinstance(operation, Identity):
        return _identity(net, num_filters, stride, bounded)
    if isinstance(operation, SeparableStack):
        net = _separable_stack(net, operation, num_filters, stride, bounded)
    else:
        net = _pooling(net, operation, num_filters, stride, bounded)
    if bounded:
        net = _clip(net)
    if schedule.keep_prob < 1.0:
        net = drop_path(net, cell_keep_prob(schedule, cell_index))
    return net


def _match_previous_layer(
    prev_layer: Optional[tf.Tensor], net: tf.Tensor, num_filters: int, bounded: bool
) -> tf.Tensor:
    """Bring the previous layer to the input's resolution and to the cell width (the input itself if there is none)."""
    if prev_layer is None:
        return net
    if spatial_shape(prev_layer) != spatial_shape(net):
        return factorized_reduction(activation(bounded)(prev_layer), num_filters, stride=2)
    if _channels(prev_layer) != num_filters:
        prev_layer = slim.conv2d(activation(bounded)(prev_layer), num_filters, 1, scope="prev_1x1")
        return slim.batch_norm(prev_layer, scope="prev_bn")
    return prev_layer


def _concat_output_states(states: Sequence[tf.Tensor], excluded_states: Tuple[int, ...]) -> tf.Tensor:
    """Concatenate the non-excluded states, first reducing any whose shape differs from the last state's."""
    last = states[-1]
    outputs = []
    for index, state in enumerate(states):
        if index in excluded_states:
            continue
        same_resolution = spatial_shape(state) == spatial_shape(last)
        if not same_resolution or _channels(state) != _channels(last):
            with tf.compat.v1.variable_scope(f"reduction_{index}"):
                state = factorized_reduction(state, _channels(last), 1 if same_resolution else 2)
        outputs.append(state)
    return tf.concat(outputs, axis=get_channel_index())


def build_cell(
    net: tf.Tensor,
    prev_layer: Optional[tf.Tensor],
    spec: CellSpec,
    *,
    scope: Optional[str],
    num_filters: int,
    stride: int,
    cell_index: int,
    drop_path_schedule: DropPathSchedule,
    use_bounded_activation: bool = False,
) -> tf.Tensor:
    """Build one cell on ``net`` (and ``prev_layer``, the output before it) under variable scope ``scope``.

    ``stride`` applies to branches reading the two input states; ``cell_index`` is the
    cell's depth (stem cells included), which sets its drop-path rate. With
    ``use_bounded_activation`` every ReLU is a ReLU6 and branch outputs are clipped to [-6, 6].
    """
    bounded = use_bounded_activation
    with tf.compat.v1.variable_scope(scope, default_name="cell"):
        prev_layer = _match_previous_layer(prev_layer, net, num_filters, bounded)
        projected = slim.conv2d(activation(bounded)(net), num_filters, 1, scope="1x1")
        states = [slim.batch_norm(projected, scope="beginning_bn"), prev_layer]
        for step in range(NUM_STEPS):
            with tf.compat.v1.variable_scope(f"comb_iter_{step}"):
                branches = []
                for side, position in (("left", 2 * step), ("right", 2 * step + 1)):
                    state_index = spec.inputs[position]
                    branch_stride = stride if state_index < _NUM_INPUT_STATES else 1
                    with tf.compat.v1.variable_scope(side):
                        branches.append(
                            _apply_operation(
                                states[state_index],
                                spec.operations[position],
                                num_filters,
                                branch_stride,
                                drop_path_schedule,
                                cell_index,
                                bounded,
                            )
                        )
                with tf.compat.v1.variable_scope("combine"):
                    combined = tf.add(branches[0], branches[1])
                    states.append(tf.nn.relu6(combined) if bounded else combined)
        with tf.compat.v1.variable_scope("cell_output"):
            return _concat_output_states(states, spec.excluded_states)


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
        self._spec = cell_spec_from_official(operations, used_hiddenstates, hiddenstate_indices)
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
        schedule = DropPathSchedule(
            self._drop_path_keep_prob, self._total_num_cells, self._total_training_steps, current_step
        )
        return build_cell(
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


class FixedTopologyCell(NasNetABaseCell):
    """A cell whose topology is fixed by its class (``OPERATIONS``, ``USED_HIDDENSTATES``, ``HIDDENSTATE_INDICES``).

    Args: as ``NasNetABaseCell`` without the topology.
    """

    OPERATIONS: Tuple[str, ...] = ()
    USED_HIDDENSTATES: Tuple[int, ...] = ()
    HIDDENSTATE_INDICES: Tuple[int, ...] = ()

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
            self.OPERATIONS,
            self.USED_HIDDENSTATES,
            self.HIDDENSTATE_INDICES,
            drop_path_keep_prob,
            total_num_cells,
            total_training_steps,
            use_bounded_activation,
        )
