"""Where a training step spends its time and memory, op by op, read from TensorFlow's own step stats.

``profile_session_step`` runs a built step with ``FULL_TRACE`` and the executed partition graphs, so
what it reports is what TensorFlow ran after grappler's rewrites (fused convolutions included),
not the Python graph:

- per op: its type (the op a user built, see ``slim_mp.op_families``; the executed kernel, such as oneDNN's
  ``_MklNativeFusedConv2D``, is kept beside it), output dtype, median time over the traced steps and, for
  convolutions and matrix products (forward and both gradients), the floating-point work and the GFLOP/s
  achieved;
- the traced steps' parallelism and critical path (medians, see ``step_parallelism``);
- at the step's peak of live tensors: the tensors alive then, their dtypes and the ops that made them. A
  tensor lives from the start of the op that makes it (its output is allocated while its inputs are still
  alive) to the end of its last consumer; an output in the buffer of one of its op's inputs (TensorFlow's
  forwarding) extends that buffer instead of counting twice. This is an estimate of the step's own tensors
  (activations kept for the backward pass, gradients, temporaries), not of the allocator's bookkeeping or the
  variables.

``profile_interleaved`` profiles several steps (float32 and mixed precision) taking turns.
"""

import dataclasses
import os
import statistics
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import tensorflow as tf
from tensorflow.python.client import timeline

from slim_mp.timing import RoundOrder, interleaved_ms
from slim_mp.measure.profiling.step_parallelism import (CAST_TYPE, StepParallelism, executed_node_defs,
                                                        median_parallelism, step_parallelism, timed_node_stats,
                                                        traced_ops)
from slim_mp.op_families import op_family

tf1 = tf.compat.v1

# Op families (see ``slim_mp.op_families``) whose work is counted, whichever kernel ran them.
CONV_TYPES = frozenset({
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
})
MATMUL_TYPES = frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2"})


@dataclasses.dataclass(frozen=True)
class OpTime:
    """One executed op of a profiled step: ``op_type`` is its family, ``kernel`` what TensorFlow ran."""

    name: str
    op_type: str
    kernel: str
    dtype: str
    micros: float
    flops: Optional[int] = None

    @property
    def gflops_per_second(self) -> Optional[float]:
        """Achieved GFLOP/s (None for ops whose work is not counted, or too fast to time)."""
        if not self.flops or self.micros <= 0:
            return None
        return self.flops / self.micros / 1e3


@dataclasses.dataclass(frozen=True)
class LiveTensor:
    """A tensor alive at the step's memory peak."""

    producer: str
    op_type: str
    dtype: str
    shape: Tuple[int, ...]
    bytes: int


@dataclasses.dataclass
class StepProfile:
    """One configuration's profile: untraced wall time, every op, the memory peak, the traced steps' parallelism."""

    label: str
    step_ms: float
    ops: List[OpTime]
    peak_live_bytes: int
    live_at_peak: List[LiveTensor]
    parallelism: Optional[StepParallelism] = None
    # The last traced step in TensorFlow's timeline format (Chrome trace JSON: Perfetto, chrome://tracing).
    chrome_trace: str = ""

    @property
    def op_ms(self) -> float:
        """The sum of the ops' times (ms); more than ``step_ms`` when ops run in parallel."""
        return sum(op.micros for op in self.ops) / 1e3

    def by_type(self) -> Dict[str, float]:
        """Milliseconds per op type, largest first."""
        totals: Dict[str, float] = {}
        for op in self.ops:
            totals[op.op_type] = totals.get(op.op_type, 0.0) + op.micros / 1e3
        return dict(sorted(totals.items(), key=lambda item: -item[1]))

    def live_bytes_by_dtype(self) -> Dict[str, int]:
        """Bytes alive at the peak per dtype, largest first."""
        totals: Dict[str, int] = {}
        for tensor in self.live_at_peak:
            totals[tensor.dtype] = totals.get(tensor.dtype, 0) + tensor.bytes
        return dict(sorted(totals.items(), key=lambda item: -item[1]))

    def casts(self) -> Tuple[int, float]:
        """How many Cast ops ran, and their total milliseconds."""
        casts = [op for op in self.ops if op.op_type == CAST_TYPE]
        return len(casts), sum(op.micros for op in casts) / 1e3


def profile_interleaved(steps: Sequence[Tuple[tf1.Session, Any, str]], traced_steps: int = 3, timed_steps: int = 5,
                        warmup_steps: int = 2, cores: Optional[int] = None) -> List[StepProfile]:
    """Profile several steps taking turns, step by step, so that load from other processes falls on each alike.

    Args:
        steps: (session, fetches, label) of each step: an initialised session with its inputs
            ready, what one step runs (e.g. the train op), its name in reports (``float32``, ``bfloat16``).
        traced_steps: steps run with ``FULL_TRACE``; each op's time is its median over them.
        timed_steps: untraced steps whose median wall time is ``step_ms`` (tracing slows a step).
        warmup_steps: untimed steps first (oneDNN primitive creation, allocator growth).
        cores: the cores the idle time is counted against (default: those this process may use).

    Returns:
        One ``StepProfile`` per step, in the order given.
    """
    if traced_steps < 1 or timed_steps < 1:
        raise ValueError(f"traced_steps={traced_steps} and timed_steps={timed_steps} must be at least 1.")
    walls = interleaved_ms([lambda session=session, fetches=fetches: session.run(fetches)
                            for session, fetches, _ in steps], timed_steps, warmup=warmup_steps,
                           order=RoundOrder.ROTATE)
    options = tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE, output_partition_graphs=True)
    traces: List[List[tf1.RunMetadata]] = [[] for _ in steps]

    def traced_run(session: tf1.Session, fetches, into: List[tf1.RunMetadata]) -> Callable[[], None]:
        def run() -> None:
            into.append(tf1.RunMetadata())
            session.run(fetches, options=options, run_metadata=into[-1])
        return run

    interleaved_ms([traced_run(session, fetches, into) for (session, fetches, _), into in zip(steps, traces)],
                   traced_steps, order=RoundOrder.ROTATE)
    cores = cores or len(os.sched_getaffinity(0))
    profiles = []
    for (_, _, label), step_walls, metadata_list in zip(steps, walls, traces):
        peak_bytes, live = live_tensors_at_peak(metadata_list[-1])
        parallelism = median_parallelism([step_parallelism(traced_ops(metadata), cores) for metadata in metadata_list])
        trace = timeline.Timeline(metadata_list[-1].step_stats).generate_chrome_trace_format()
        profiles.append(StepProfile(label, statistics.median(step_walls), executed_ops(metadata_list), peak_bytes,
                                    live, parallelism, trace))
    return profiles


def profile_session_step(session: tf1.Session, fetches, label: str, traced_steps: int = 3,
                         timed_steps: int = 5, warmup_steps: int = 2, cores: Optional[int] = None) -> StepProfile:
    """Profile ``session.run(fetches)`` alone; see ``profile_interleaved`` for the arguments."""
    return profile_interleaved([(session, fetches, label)], traced_steps, timed_steps, warmup_steps, cores)[0]


def _output_shapes(metadata: tf1.RunMetadata) -> Dict[str, Tuple[int, ...]]:
    """``"node:slot"`` -> the shape of every tensor the step produced."""
    shapes = {}
    for stats in timed_node_stats(metadata):
        for output in stats.output:
            dims = tuple(int(dim.size) for dim in output.tensor_description.shape.dim)
            shapes[f"{stats.node_name}:{output.slot}"] = dims
    return shapes


def _tensor_name(input_name: str) -> str:
    return input_name if ":" in input_name else f"{input_name}:0"


def _product(values: Iterable[int]) -> int:
    result = 1
    for value in values:
        result *= value
    return result


def conv_matmul_flops(node: tf1.NodeDef, shapes: Dict[str, Tuple[int, ...]]) -> Optional[int]:
    """Multiply-adds x 2 of a convolution, its gradients or a matrix product, from the executed shapes.

    Every convolution-like op does ``2 * (elements of the forward output) * (filter elements per
    output)``: for the gradients the forward output is the incoming gradient. None when the op is
    not of these families or a shape is unknown. The inputs counted (data, filter, incoming
    gradient) come first in grappler's and oneDNN's kernels too.
    """
    inputs = [_tensor_name(name) for name in node.input if not name.startswith("^")]
    output = shapes.get(f"{node.name}:0")
    family = op_family(node.op)
    if family in MATMUL_TYPES:
        if output is None or not inputs or inputs[0] not in shapes:
            return None
        left = shapes[inputs[0]]
        adjoint = node.attr["transpose_a"].b or node.attr["adj_x"].b
        shared = left[-2] if adjoint else left[-1]
        return 2 * _product(output) * shared
    if family not in CONV_TYPES or len(inputs) < 2:
        return None
    depthwise = family.startswith("Depthwise")
    if family.endswith("BackpropInput"):
        forward_output, filter_shape = shapes.get(inputs[2]), shapes.get(inputs[1])
    elif family.endswith("BackpropFilter"):
        forward_output, filter_shape = shapes.get(inputs[2]), output
    else:
        forward_output, filter_shape = output, shapes.get(inputs[1])
    if forward_output is None or filter_shape is None or len(filter_shape) != 4:
        return None
    per_output = filter_shape[0] * filter_shape[1] * (1 if depthwise else filter_shape[2])
    return 2 * _product(forward_output) * per_output


def _dtype_of(node: Optional[tf1.NodeDef]) -> str:
    if node is None:
        return "-"
    for key in ("T", "DstT", "dtype", "out_type"):
        if key in node.attr and node.attr[key].type:
            return tf.dtypes.as_dtype(node.attr[key].type).name
    return "-"


def executed_ops(metadata_list: Sequence[tf1.RunMetadata]) -> List[OpTime]:
    """Every op the traced steps ran, with its median time (microseconds), slowest first."""
    nodes = executed_node_defs(metadata_list[-1])
    shapes = _output_shapes(metadata_list[-1])
    times: Dict[str, List[float]] = {}
    for metadata in metadata_list:
        for stats in timed_node_stats(metadata):
            if stats.node_name in nodes:
                times.setdefault(stats.node_name, []).append(stats.op_end_rel_micros - stats.op_start_rel_micros)
    ops = []
    for name, samples in times.items():
        node = nodes[name]
        ops.append(OpTime(name, op_family(node.op), node.op, _dtype_of(node), float(statistics.median(samples)),
                          conv_matmul_flops(node, shapes)))
    return sorted(ops, key=lambda op: -op.micros)


@dataclasses.dataclass
class _Buffer:
    tensor: LiveTensor
    born: int
    dies: int
    ptr: int


def live_tensors_at_peak(metadata: tf1.RunMetadata) -> Tuple[int, List[LiveTensor]]:
    """The most bytes of step tensors alive at once, and those tensors (largest first); see the module docstring."""
    nodes = executed_node_defs(metadata)
    starts: Dict[str, int] = {}
    ends: Dict[str, int] = {}
    records = []
    for stats in timed_node_stats(metadata):
        starts[stats.node_name] = stats.all_start_micros
        ends[stats.node_name] = stats.all_start_micros + stats.all_end_rel_micros
        records.append(stats)
    last_use: Dict[str, int] = {}
    for name, node in nodes.items():
        for input_name in node.input:
            if input_name.startswith("^") or name not in ends:
                continue
            tensor = _tensor_name(input_name)
            last_use[tensor] = max(last_use.get(tensor, 0), ends[name])
    buffers: List[_Buffer] = []
    buffer_of: Dict[str, _Buffer] = {}  # tensor name -> the buffer it lives in
    for stats in sorted(records, key=lambda s: ends[s.node_name]):
        node = nodes.get(stats.node_name)
        inputs = [_tensor_name(name) for name in node.input if not name.startswith("^")] if node else []
        for output in stats.output:
            allocation = output.tensor_description.allocation_description
            if allocation.allocated_bytes <= 0:
                continue
            key = f"{stats.node_name}:{output.slot}"
            born = starts[stats.node_name]
            dies = max(last_use.get(key, ends[stats.node_name]), ends[stats.node_name])
            forwarded = next((buffer_of[name] for name in inputs
                              if name in buffer_of and allocation.ptr and buffer_of[name].ptr == allocation.ptr), None)
            if forwarded is not None:
                forwarded.dies = max(forwarded.dies, dies)
                buffer_of[key] = forwarded
                continue
            tensor = LiveTensor(stats.node_name, op_family(node.op) if node else "-",
                                tf.dtypes.as_dtype(output.tensor_description.dtype).name,
                                tuple(int(d.size) for d in output.tensor_description.shape.dim),
                                int(allocation.allocated_bytes))
            buffer_of[key] = _Buffer(tensor, born, dies, allocation.ptr)
            buffers.append(buffer_of[key])
    return _peak(buffers)


def _peak(buffers: List[_Buffer]) -> Tuple[int, List[LiveTensor]]:
    events = sorted([(b.born, b.tensor.bytes) for b in buffers] + [(b.dies, -b.tensor.bytes) for b in buffers],
                    key=lambda event: (event[0], event[1]))
    live = peak = peak_time = 0
    for moment, change in events:
        live += change
        if live > peak:
            peak, peak_time = live, moment
    alive = [b.tensor for b in buffers if b.born <= peak_time < b.dies or b.born == b.dies == peak_time]
    return peak, sorted(alive, key=lambda tensor: -tensor.bytes)
