"""Time whole training steps of candidate placements, each on a standalone copy of the region.

The per-op estimate (``estimate``) adds up the allow ops and the casts. It leaves out what goes
low around them (batch norm, activations, pooling, dropout), oneDNN's layout reorders and how the
ops overlap, and on small networks these decide: cifarnet's fully connected layers are each faster
in bfloat16, yet the estimate kept them float32. So when several placements are close by the
estimate, each is applied to its own copy of the region and the copies' steps are timed against
each other.

A copy holds the region's ops with their shapes and attributes, minus what lies outside the
computation: variable reads and input ops (``Placeholder``, ``IteratorGetNext``, ...) become
random variables of the same shapes and types, and stateful ops other than random numbers
(variable updates, readers) are left out, their inputs still computed. The painting is applied
with the pass's own ``paint`` / ``refine`` / ``rebuild``, the gradient of the objectives
(the loss) with respect to the trainable variables' substitutes is taken as TF1 optimizers take
it (gated per op), a momentum update with rate 0 consumes it, and these steps are timed in
interleaved rounds, each with the noise of its comparison with a reference step (``stopwatch``).
"""

import dataclasses
import hashlib
from typing import Dict, List, Optional, Sequence, Set, Tuple

import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from slim_mp.graph_pass.op_classes import FUNCTION_OP_TYPES, RANDOM_OP_TYPES, SOURCE_OP_TYPES
from slim_mp.graph_pass.paint import PaintConfig, is_variable_read
from slim_mp.graph_pass.placement.candidate import Candidate, apply_placement
from slim_mp.graph_pass.rebuild import rebuild_low_precision
from slim_mp.graph_pass.refine import painted_low_ops
from slim_mp.graph_pass.region import Region, select_region
from slim_mp.graph_pass.placement.target import MeasuringTarget
from slim_mp.graph_pass.placement.stopwatch import Timed, first_values, interleaved_ms, random_variable, timed_against

# Source ops a copy keeps: constants, and defaults it can compute itself.
_KEPT_SOURCE_TYPES = frozenset({"Const", "PlaceholderWithDefault"})


@dataclasses.dataclass(frozen=True)
class Substitute:
    """A tensor from outside the copied computation, replaced by a random variable of its shape and type."""

    tensor_name: str
    shape: Tuple[int, ...]
    dtype: tf.DType
    trainable: bool


@dataclasses.dataclass(frozen=True)
class RegionCopy:
    """A standalone copy of a region: its ops, what replaces their outside inputs, what one step computes."""

    graph_def: graph_pb2.GraphDef
    substitutes: Tuple[Substitute, ...]
    objectives: Tuple[str, ...]
    sinks: Tuple[str, ...]

    def digest(self) -> str:
        """A stable key of the copy (ops, attributes, shapes, substitutes) for the timing cache."""
        content = hashlib.sha1(self.graph_def.SerializeToString(deterministic=True))
        content.update(repr([(s.tensor_name, s.shape, s.dtype.name, s.trainable) for s in self.substitutes]).encode())
        content.update(repr((self.objectives, self.sinks)).encode())
        return content.hexdigest()[:20]


def _variable_of_read(op: tf.Operation) -> tf.Operation:
    return op.inputs[0].op


def _outside(op: tf.Operation) -> bool:
    """Whether ``op`` lies outside the copied computation (its outputs become substitutes, if used)."""
    if is_variable_read(op) or op.type in SOURCE_OP_TYPES - _KEPT_SOURCE_TYPES:
        return True
    return op.op_def.is_stateful and op.type not in RANDOM_OP_TYPES


def _sinks(region: Region) -> List[tf.Operation]:
    """The region's ops nothing in the region consumes (the fetches and the update ops)."""
    consumed = {t.op for op in region.ops for t in op.inputs} | {c for op in region.ops for c in op.control_inputs}
    return [op for op in region.ops if op not in consumed]


def _substitute(tensor: tf.Tensor, trainable_variables: Set[str]) -> Substitute:
    if not tensor.shape.is_fully_defined():
        raise ValueError(f"{tensor.name} has no static shape ({tensor.shape})")
    dtype = tensor.dtype.base_dtype
    if not (dtype.is_floating or dtype.is_integer or dtype == tf.bool):
        raise ValueError(f"{tensor.name} is a {dtype.name} tensor from outside the computation")
    op = tensor.op
    trainable = op.type in ("Identity", "ReadVariableOp") and _variable_of_read(op).name in trainable_variables
    return Substitute(tensor.name, tuple(tensor.shape.as_list()), dtype, trainable)


def copy_region(region: Region, objectives: Sequence[tf.Tensor]) -> RegionCopy:
    """The standalone copy of ``region`` computing ``objectives`` (float tensors) and the region's sinks.

    Raises:
      ValueError: when the copy cannot stand alone (TF1 control flow, function calls, an outside
        input without a static shape or of a type a random variable cannot stand for).
    """
    trainable_variables = {v.op.name for v in region.graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)}
    roots: List[tf.Operation] = []
    for op in [t.op for t in objectives] + _sinks(region):
        roots.extend([op] if not _outside(op) else [t.op for t in op.inputs if not _outside(t.op)])
    kept: Dict[str, tf.Operation] = {}
    substitutes: Dict[str, Substitute] = {}
    stack = list(roots)
    while stack:
        op = stack.pop()
        if op.name in kept:
            continue
        if op._get_control_flow_context() is not None or op.type in FUNCTION_OP_TYPES:
            raise ValueError(f"{op.name} ({op.type}) runs inside control flow or a function")
        kept[op.name] = op
        for tensor in op.inputs:
            if _outside(tensor.op):
                substitutes.setdefault(tensor.name, _substitute(tensor, trainable_variables))
            else:
                stack.append(tensor.op)
        stack.extend(c for c in op.control_inputs if not _outside(c))
    graph_def = graph_pb2.GraphDef()
    graph_def.versions.CopyFrom(region.graph.graph_def_versions)
    for op in region.ops:
        if op.name not in kept:
            continue
        node = graph_def.node.add()
        node.CopyFrom(op.node_def)
        node.ClearField("device")
        if "_class" in node.attr:
            del node.attr["_class"]
        inputs = [name for name in node.input if not name.startswith("^") or name[1:] in kept]
        del node.input[:]
        node.input.extend(inputs)
    sinks = tuple(sorted({op.name for op in roots}))
    return RegionCopy(graph_def, tuple(substitutes[name] for name in sorted(substitutes)),
                      tuple(t.name for t in objectives), sinks)


@dataclasses.dataclass
class CandidateStep:
    """One candidate's step, ready to run: ``session.run(target)`` runs forward, backward and the updates.

    ``target``'s first value is the first objective (the loss); ``substitutes`` maps each replaced
    tensor's name to the variable standing in for it (load values there to reproduce a batch).
    """

    session: tf.compat.v1.Session
    target: tf.Tensor
    substitutes: Dict[str, tf.Variable]


def _apply_with_zero_rate(value: tf.Tensor, gradient) -> tf.Operation:
    """A momentum update of the variable read by ``value`` with learning rate 0 (the weights stay put).

    Training consumes every float32 gradient in full in its update, so does this; a momentum step
    (slim's most common optimizer family) also costs about what training's does.
    """
    if isinstance(gradient, tf.IndexedSlices):
        gradient = tf.convert_to_tensor(gradient)
    accumulator = tf.Variable(tf.zeros(value.shape, value.dtype), trainable=False)
    return tf.raw_ops.ResourceApplyMomentum(var=value.op.inputs[0], accum=accumulator.handle,
                                            lr=tf.constant(0.0, value.dtype), grad=gradient,
                                            momentum=tf.constant(0.9, value.dtype))


def build_candidate_step(copy: RegionCopy, config: PaintConfig, candidate: Candidate,
                         target: MeasuringTarget = MeasuringTarget()) -> CandidateStep:
    """A session running one step of ``copy`` painted as ``candidate`` says, on ``target``'s device and options."""
    graph = tf.Graph()
    with graph.as_default(), tf.device(target.local_device() or None):
        input_map, trainable = {}, []
        with tf.name_scope("placement_substitutes"):
            for substitute in copy.substitutes:
                input_map[substitute.tensor_name] = random_variable(substitute.shape, substitute.dtype)
                if substitute.trainable:
                    trainable.append(input_map[substitute.tensor_name])
        variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
        substitutes = {name: variables[tensor.op.inputs[0].op.name] for name, tensor in input_map.items()}
        tf.graph_util.import_graph_def(copy.graph_def, input_map=input_map, name="")
        objectives = [graph.get_tensor_by_name(name) for name in copy.objectives]
        sinks = [graph.get_operation_by_name(name) for name in copy.sinks]
        region = select_region([objectives, sinks])
        decisions, low = painted_low_ops(region, apply_placement(config, candidate))
        rebuilder = rebuild_low_precision(graph, low, {op: d.ports for op, d in decisions.items()}, config.precision)
        objectives, sinks = rebuilder.remap(objectives), rebuilder.remap(sinks)
        computed = list(objectives) + [op.outputs[0] for op in sinks if op.outputs]
        updates = []
        if target.training and objectives and trainable:
            # Gated per op, as TF1 optimizers take them by default (GATE_OP): ungated, the low-precision
            # steps overlap their casts with other work and run up to 15% faster than training will.
            gradients = tf.gradients(objectives, trainable, gate_gradients=True)
            updates = [_apply_with_zero_rate(value, gradient) for value, gradient in zip(trainable, gradients)
                       if gradient is not None]
        with tf.control_dependencies(updates):
            step = first_values(computed)
        init = tf.compat.v1.global_variables_initializer()
    session = target.session(graph)
    session.run(init)
    return CandidateStep(session, step, substitutes)


def time_candidate_steps(copy: RegionCopy, config: PaintConfig, candidates: Sequence[Candidate],
                         target: MeasuringTarget = MeasuringTarget(), warmup: int = 2, runs: int = 7,
                         reference: int = 0) -> List[Optional[Timed]]:
    """One step of each candidate timed in ``runs`` interleaved rounds: its fastest milliseconds and the
    noise of comparing it with candidate ``reference``; None for one that fails to run."""
    steps: List[CandidateStep] = []
    try:
        for candidate in candidates:
            steps.append(build_candidate_step(copy, config, candidate, target))
        rounds = interleaved_ms([step.session.make_callable(step.target) for step in steps], warmup, runs)
        return timed_against(rounds, reference)
    finally:
        for step in steps:
            step.session.close()
