"""The searched cells of NASNet-A and PNASNet-5, with drop-path and factorized reduction.

A cell starts from two hidden states: its input (projected by a 1x1 convolution) and
the output of the layer before it. Five steps each transform two existing states with
searched operations and add the results, appending the sum as a new state. The cell
outputs the channel concatenation of every state its spec does not exclude. Variable
scopes follow the official checkpoints (``comb_iter_<step>/<left|right>/...``).
"""

import dataclasses
from typing import Optional, Sequence, Tuple, Union

import tensorflow as tf
import tf_slim as slim

NUM_STEPS = 5
_NUM_INPUT_STATES = 2


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


_SEP_3X3 = SeparableStack(kernel_size=3)
_SEP_5X5 = SeparableStack(kernel_size=5)
_SEP_7X7 = SeparableStack(kernel_size=7)
_AVG_3X3 = Pooling("avg")
_MAX_3X3 = Pooling("max")
_IDENTITY = Identity()

NASNET_A_NORMAL = CellSpec(
    operations=(_SEP_5X5, _SEP_3X3, _SEP_5X5, _SEP_3X3, _AVG_3X3, _IDENTITY, _AVG_3X3, _AVG_3X3, _SEP_3X3, _IDENTITY),
    inputs=(0, 1, 1, 1, 0, 1, 1, 1, 0, 0),
    excluded_states=(0,),
)
NASNET_A_REDUCTION = CellSpec(
    operations=(_SEP_5X5, _SEP_7X7, _MAX_3X3, _SEP_7X7, _AVG_3X3, _SEP_5X5, _IDENTITY, _AVG_3X3, _SEP_3X3, _MAX_3X3),
    inputs=(0, 1, 0, 1, 0, 1, 3, 2, 2, 0),
    excluded_states=(0, 1, 2),
)
PNASNET_5 = CellSpec(
    operations=(_SEP_5X5, _MAX_3X3, _SEP_7X7, _MAX_3X3, _SEP_5X5, _SEP_3X3, _SEP_3X3, _MAX_3X3, _SEP_3X3, _IDENTITY),
    inputs=(1, 1, 0, 0, 0, 0, 4, 0, 1, 0),
    excluded_states=(0, 1),
)


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


def drop_path(net: tf.Tensor, keep_prob: tf.Tensor) -> tf.Tensor:
    """Zero each example of ``net`` with probability ``1 - keep_prob`` and scale the kept ones by ``1 / keep_prob``."""
    noise = tf.random.uniform([tf.shape(net)[0], 1, 1, 1], dtype=tf.float32)
    keep_mask = tf.floor(keep_prob + noise)
    return net * tf.cast(keep_mask / keep_prob, net.dtype)


def factorized_reduction(net: tf.Tensor, output_filters: int, stride: int) -> tf.Tensor:
    """Project ``net`` to ``output_filters`` channels, downsampling by ``stride`` without skipping pixels.

    A strided 1x1 convolution would never see the odd rows and columns, so at stride 2
    one half of the filters reads the even pixel grid and the other half the grid
    shifted by one pixel (zero-padded at the bottom-right edge).
    """
    if stride == 1:
        net = slim.conv2d(net, output_filters, 1, scope="path_conv")
        return slim.batch_norm(net, scope="path_bn")
    even_grid = net[:, ::stride, ::stride, :]
    shifted = tf.pad(net[:, 1:, 1:, :], [[0, 0], [0, 1], [0, 1], [0, 0]])
    odd_grid = shifted[:, ::stride, ::stride, :]
    even_filters = output_filters // 2
    even_path = slim.conv2d(even_grid, even_filters, 1, scope="path1_conv")
    odd_path = slim.conv2d(odd_grid, output_filters - even_filters, 1, scope="path2_conv")
    return slim.batch_norm(tf.concat([even_path, odd_path], axis=3), scope="final_path_bn")


def _channels(net: tf.Tensor) -> int:
    return int(net.shape[3])


def _spatial_shape(net: tf.Tensor) -> list:
    return net.shape[1:3].as_list()


def _projection(net: tf.Tensor, num_filters: int, stride: int) -> tf.Tensor:
    net = slim.conv2d(net, num_filters, 1, stride=stride, scope="1x1")
    return slim.batch_norm(net, scope="bn_1")


def _separable_stack(net: tf.Tensor, operation: SeparableStack, num_filters: int, stride: int) -> tf.Tensor:
    size = operation.kernel_size
    for layer in range(1, operation.num_layers + 1):
        net = tf.nn.relu(net)
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


def _pooling(net: tf.Tensor, operation: Pooling, num_filters: int, stride: int) -> tf.Tensor:
    pool = slim.avg_pool2d if operation.kind == "avg" else slim.max_pool2d
    pooled = pool(net, operation.size, stride=stride, padding="SAME")
    if _channels(net) != num_filters:
        return _projection(pooled, num_filters, 1)
    return pooled


def _apply_operation(
    net: tf.Tensor,
    operation: Operation,
    num_filters: int,
    stride: int,
    schedule: DropPathSchedule,
    cell_index: int,
) -> tf.Tensor:
    """One branch of a step; every operation but the identity is followed by drop-path."""
    if isinstance(operation, Identity):
        if stride == 1 and _channels(net) == num_filters:
            return net
        return _projection(tf.nn.relu(net), num_filters, stride)
    if isinstance(operation, SeparableStack):
        net = _separable_stack(net, operation, num_filters, stride)
    else:
        net = _pooling(net, operation, num_filters, stride)
    if schedule.keep_prob < 1.0:
        net = drop_path(net, cell_keep_prob(schedule, cell_index))
    return net


def _match_previous_layer(prev_layer: Optional[tf.Tensor], net: tf.Tensor, num_filters: int) -> tf.Tensor:
    """Bring the previous layer to the input's resolution and to the cell width (the input itself if there is none)."""
    if prev_layer is None:
        return net
    if _spatial_shape(prev_layer) != _spatial_shape(net):
        return factorized_reduction(tf.nn.relu(prev_layer), num_filters, stride=2)
    if _channels(prev_layer) != num_filters:
        prev_layer = slim.conv2d(tf.nn.relu(prev_layer), num_filters, 1, scope="prev_1x1")
        return slim.batch_norm(prev_layer, scope="prev_bn")
    return prev_layer


def _concat_output_states(states: Sequence[tf.Tensor], excluded_states: Tuple[int, ...]) -> tf.Tensor:
    """Concatenate the non-excluded states, first reducing any whose shape differs from the last state's."""
    last = states[-1]
    outputs = []
    for index, state in enumerate(states):
        if index in excluded_states:
            continue
        same_resolution = _spatial_shape(state) == _spatial_shape(last)
        if not same_resolution or _channels(state) != _channels(last):
            with tf.compat.v1.variable_scope(f"reduction_{index}"):
                state = factorized_reduction(state, _channels(last), 1 if same_resolution else 2)
        outputs.append(state)
    return tf.concat(outputs, axis=3)


def build_cell(
    net: tf.Tensor,
    prev_layer: Optional[tf.Tensor],
    spec: CellSpec,
    *,
    scope: str,
    num_filters: int,
    stride: int,
    cell_index: int,
    drop_path_schedule: DropPathSchedule,
) -> tf.Tensor:
    """Build one cell on ``net`` (and ``prev_layer``, the output before it) under variable scope ``scope``.

    ``stride`` applies to branches reading the two input states; ``cell_index`` is the
    cell's depth (stem cells included), which sets its drop-path rate.
    """
    with tf.compat.v1.variable_scope(scope):
        prev_layer = _match_previous_layer(prev_layer, net, num_filters)
        projected = slim.conv2d(tf.nn.relu(net), num_filters, 1, scope="1x1")
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
                            )
                        )
                with tf.compat.v1.variable_scope("combine"):
                    states.append(tf.add(branches[0], branches[1]))
        with tf.compat.v1.variable_scope("cell_output"):
            return _concat_output_states(states, spec.excluded_states)
