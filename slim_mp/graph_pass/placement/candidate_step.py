"""One candidate's whole training step, built on the region's copy, and the pool that keeps built steps open.

The candidate is applied to its own copy of the region (``region_copy``) with the pass's own
``paint`` / ``refine`` / ``rebuild``; the gradient of the objectives (the loss) with respect to
the trainable variables' substitutes is taken as TF1 optimizers take it (gated per op), and a
momentum update with rate 0 consumes it. An inference step has neither; a served graph's
(``MeasuringTarget.frozen_weights``) holds its weights as constants, as the export freezes them
(``_freeze_weights``). Building a ResNet-50 step takes seconds, so a built
step stays open in its ``StepPool`` until the decision is made: the check times again the steps
the search already built.

Building a step is Python work on one core; opening it (session, variable initialisation, the
untimed warm-up runs that pay grappler and the executor) is TensorFlow's, which releases the
interpreter. So the pool opens each step in a background thread while the next graph is built
(``StepPool.start``): nothing is timed until every step of a batch is open, so the overlap costs
no timing its accuracy.
"""

import concurrent.futures
import dataclasses
from typing import Callable, Dict, Iterable, Optional, Sequence, Tuple

import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from slim_mp.graph_pass.gradient_kernels import GradientKernels
from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement.candidate import Candidate, apply_placement
from slim_mp.graph_pass.placement.region_copy import RegionCopy
from slim_mp.graph_pass.placement.timing_graphs import (first_values, import_variables, initializer_names,
                                                        random_constant, random_variable, variable_like,
                                                        variables_initializer)
from slim_mp.graph_pass.placement.target import MeasuringTarget
from slim_mp.graph_pass.rebuild import rebuild_low_precision
from slim_mp.graph_pass.refine import painted_low_ops
from slim_mp.graph_pass.region import select_region


@dataclasses.dataclass
class CandidateStep:
    """One candidate's step, ready to run: ``session.run(target)`` runs forward, backward and the updates.

    ``target``'s first value is the first objective (the loss); ``substitutes`` maps each replaced
    tensor's name to the read of the variable standing in for it (``timing_graphs.load_variables`` sets
    values there to reproduce a batch). ``run``: the session's callable of ``target``, the one the
    warm-up ran (a new callable pays grappler and the executor again on its first call); None
    when the warm-up failed.
    """

    session: tf.compat.v1.Session
    target: tf.Tensor
    substitutes: Dict[str, tf.Tensor]
    run: Optional[Callable[[], object]] = None


@dataclasses.dataclass(frozen=True)
class _StepGraph:
    """A candidate's step built but not opened: the graph, the fetch, the substitutes' reads and their initialiser."""

    graph: tf.Graph
    target: tf.Tensor
    substitutes: Dict[str, tf.Tensor]
    init: tf.Operation


@dataclasses.dataclass(frozen=True)
class _Substitutes:
    """The variables standing in for a copy's outside inputs and, when training, the momentum
    accumulators of the trainable ones, as a graph of their own (built once per copy, imported into
    every candidate's step): the reads' names in ``copy.substitutes``' order, the accumulators' in
    the trainable ones' order, and the initialising assigns."""

    graph_def: graph_pb2.GraphDef
    reads: Tuple[str, ...]
    accumulators: Tuple[str, ...]
    initializers: Tuple[str, ...]


def _substitutes_of(copy: RegionCopy, training: bool) -> _Substitutes:
    graph = tf.Graph()
    with graph.as_default():
        reads = [random_variable(s.shape, s.dtype) for s in copy.substitutes]
        # Not zeros: grappler would fold a zeros initialiser into a constant as large as the weights.
        accumulators = [variable_like(read) for s, read in zip(copy.substitutes, reads) if training and s.trainable]
    return _Substitutes(graph.as_graph_def(), tuple(read.name for read in reads),
                        tuple(accumulator.name for accumulator in accumulators), tuple(initializer_names(graph)))


def _apply_with_zero_rate(value: tf.Tensor, accumulator: tf.Tensor, gradient, rates: Dict[tf.DType, tuple]
                          ) -> tf.Operation:
    """A momentum update of the variable read by ``value`` with learning rate 0 (the weights stay put).

    Training consumes every float32 gradient in full in its update, so does this; a momentum step
    (slim's most common optimizer family) also costs about what training's does. ``rates``: the
    step's (learning rate, momentum) constants by type, made once.
    """
    if isinstance(gradient, tf.IndexedSlices):
        gradient = tf.convert_to_tensor(gradient)
    if value.dtype not in rates:
        rates[value.dtype] = (tf.constant(0.0, value.dtype), tf.constant(0.9, value.dtype))
    rate, momentum = rates[value.dtype]
    return tf.raw_ops.ResourceApplyMomentum(var=value.op.inputs[0], accum=accumulator.op.inputs[0], lr=rate,
                                            grad=gradient, momentum=momentum)


def _reroute(tensor: tf.Tensor, replacement: tf.Tensor) -> None:
    """Point every consumer of ``tensor`` at ``replacement`` instead."""
    for consumer in tensor.consumers():
        for index, consumed in enumerate(consumer.inputs):
            if consumed is tensor:
                consumer._update_input(index, replacement)  # pylint: disable=protected-access


def _freeze_weights(weight_reads: Sequence[tf.Tensor], precision: tf.DType) -> None:
    """Make each weight a constant, stored in ``precision`` where its layer reads it cast to that type, as a
    served graph holds its weights (frozen; the export folds the casts).

    Why it matters: oneDNN reorders a constant filter once and keeps it, a variable's at every run; and a
    step that cast its weights every run would charge low precision a cost serving never pays. Both weigh
    most at small batches, where a step timed with variables kept float32 what serves faster low
    (docs/BENCHMARKS.md, "Serving").
    """
    for read in weight_reads:
        shape = read.shape.as_list()
        for cast in [op for op in read.consumers() if op.type == "Cast" and op.outputs[0].dtype == precision]:
            _reroute(cast.outputs[0], random_constant(shape, precision))
        if any(consumer.type != "Cast" or consumer.outputs[0].dtype != precision for consumer in read.consumers()):
            _reroute(read, random_constant(shape, read.dtype))


def _step_graph(copy: RegionCopy, config: PaintConfig, candidate: Candidate, target: MeasuringTarget,
                substitutes: _Substitutes, kernels: GradientKernels) -> _StepGraph:
    """The graph of one step of ``copy`` painted as ``candidate`` says, its low ops' gradients by ``kernels``,
    on ``target``'s device."""
    graph = tf.Graph()
    with graph.as_default(), tf.device(target.local_device() or None):
        imported = import_variables(substitutes.graph_def, substitutes.reads + substitutes.accumulators,
                                    substitutes.initializers, "placement_substitutes")
        reads, accumulators = imported[:len(substitutes.reads)], imported[len(substitutes.reads):]
        input_map = {s.tensor_name: read for s, read in zip(copy.substitutes, reads)}
        trainable = [read for s, read in zip(copy.substitutes, reads) if s.trainable]
        tf.graph_util.import_graph_def(copy.graph_def, input_map=input_map, name="")
        objectives = [graph.get_tensor_by_name(name) for name in copy.objectives]
        sinks = [graph.get_operation_by_name(name) for name in copy.sinks]
        region = select_region([objectives, sinks])
        decisions, low = painted_low_ops(region, apply_placement(config, candidate))
        rebuilder = rebuild_low_precision(graph, low, {op: d.ports for op, d in decisions.items()}, config.precision,
                                          kernels)
        objectives, sinks = rebuilder.remap(objectives), rebuilder.remap(sinks)
        if target.frozen_weights:
            _freeze_weights([read for s, read in zip(copy.substitutes, reads) if not s.is_input], config.precision)
        computed = list(objectives) + [op.outputs[0] for op in sinks if op.outputs]
        updates = []
        if target.training and objectives and trainable:
            # Gated per op, as TF1 optimizers take them by default (GATE_OP): ungated, the low-precision
            # steps overlap their casts with other work and run up to 15% faster than training will.
            gradients = tf.gradients(objectives, trainable, gate_gradients=True)
            rates: Dict[tf.DType, tuple] = {}
            updates = [_apply_with_zero_rate(value, accumulator, gradient, rates)
                       for value, accumulator, gradient in zip(trainable, accumulators, gradients)
                       if gradient is not None]
        with tf.control_dependencies(updates):
            step = first_values(computed)
        init = variables_initializer()
    return _StepGraph(graph, step, input_map, init)


def _opened(built: _StepGraph, target: MeasuringTarget, warmup: int) -> CandidateStep:
    """``built`` in a session of ``target``'s, its variables initialised, after ``warmup`` untimed runs.

    A step whose warm-up fails to run (an op without a kernel here, say) is returned without its
    ``run``: the timing leaves it out. A failure to initialise propagates (the batch is then not timed).
    """
    session = target.session(built.graph)
    session.run(built.init)
    run = session.make_callable(built.target)
    try:
        for _ in range(warmup):
            run()
    except tf.errors.OpError:
        return CandidateStep(session, built.target, built.substitutes)
    return CandidateStep(session, built.target, built.substitutes, run)


def build_candidate_step(copy: RegionCopy, config: PaintConfig, candidate: Candidate,
                         target: MeasuringTarget = MeasuringTarget(), warmup: int = 0) -> CandidateStep:
    """A session running one step of ``copy`` painted as ``candidate`` says (TensorFlow's own gradients), on
    ``target``'s device and options, after ``warmup`` untimed runs."""
    built = _step_graph(copy, config, candidate, target, _substitutes_of(copy, target.training), GradientKernels())
    return _opened(built, target, warmup)


# A step in the pool: its candidate and the gradient kernels of the ops it may run low.
_StepKey = Tuple[Candidate, GradientKernels]


class StepPool:
    """The built steps of one region copy, by candidate and gradient kernels: each built once, warmed up
    ``warmup`` times, open until ``close``.

    Two background threads: one builds graphs ahead (``build_ahead``: Python work, while the
    micro-benchmarks' untimed first runs hold no lock), one opens built steps (``start``: also ahead
    of their batch, while the search runs). The rule that keeps timings honest: nothing of the
    pool's runs while rounds are timed, so ``wait_idle`` comes before any round (the
    micro-benchmarks' and the whole steps'). A step is kept by its candidate and the kernels of the
    ops it does not keep float32, so the all-float32 step built ahead, before the kernels are chosen,
    is the one the decision's kernels ask for.
    """

    def __init__(self, copy: RegionCopy, config: PaintConfig, target: MeasuringTarget, warmup: int = 1) -> None:
        self.copy, self.config, self.target, self.warmup = copy, config, target, warmup
        self._steps: Dict[_StepKey, concurrent.futures.Future] = {}
        self._graphs: Dict[_StepKey, concurrent.futures.Future] = {}
        self._substitutes: Optional[concurrent.futures.Future] = None
        self._builder = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="placement_build")
        self._opener = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="placement_step")

    @staticmethod
    def _key(candidate: Candidate, kernels: GradientKernels) -> _StepKey:
        return candidate, kernels.only(kernels.names() - candidate.float32_ops)

    def _substitutes_graph(self) -> concurrent.futures.Future:
        if self._substitutes is None:
            self._substitutes = self._builder.submit(_substitutes_of, self.copy, self.target.training)
        return self._substitutes

    def _built(self, key: _StepKey) -> _StepGraph:
        candidate, kernels = key
        return _step_graph(self.copy, self.config, candidate, self.target, self._substitutes_graph().result(),
                           kernels)

    def build_ahead(self, candidates: Sequence[Candidate], kernels: GradientKernels = GradientKernels()) -> None:
        """Start building the graphs of ``candidates`` in the background (nothing is run: no session)."""
        for key in (self._key(candidate, kernels) for candidate in candidates):
            if key not in self._steps and key not in self._graphs:
                self._substitutes_graph()
                self._graphs[key] = self._builder.submit(self._built, key)

    def wait_idle(self) -> None:
        """Return once nothing of the pool runs in the background: no graph being built ahead, no step
        being opened (errors are raised by ``start`` and ``step``)."""
        for background in [self._substitutes, *self._graphs.values(), *self._steps.values()]:
            if background is not None:
                background.exception()

    def start(self, candidates: Sequence[Candidate], kernels: GradientKernels = GradientKernels()) -> None:
        """Build the steps of ``candidates`` (their low ops' gradients by ``kernels``) not built yet, one after
        the other, each opened and warmed up in the background while the next is built; those built ahead
        open first, so that their opening overlaps the building of the others. Build errors propagate here;
        opening errors from ``step``."""
        waiting = [key for key in dict.fromkeys(self._key(c, kernels) for c in candidates) if key not in self._steps]
        for key in sorted(waiting, key=lambda k: k not in self._graphs):
            building = self._graphs.pop(key, None)
            built = building.result() if building is not None else self._built(key)
            self._steps[key] = self._opener.submit(_opened, built, self.target, self.warmup)

    def step(self, candidate: Candidate, kernels: GradientKernels = GradientKernels()) -> CandidateStep:
        """``candidate``'s step, open and warmed up (built now unless an equal candidate's already is)."""
        self.start([candidate], kernels)
        return self._steps[self._key(candidate, kernels)].result()

    def keep_only(self, candidates: Iterable[Candidate]) -> None:
        """Close the steps of all but ``candidates`` (their memory is a whole step's each)."""
        kept = set(candidates)
        for key in [key for key in self._steps if key[0] not in kept]:
            opening = self._steps.pop(key)
            if opening.exception() is None:
                opening.result().session.close()

    def close(self) -> None:
        """Close every step's session and stop the background threads."""
        self.wait_idle()
        self.keep_only(())
        self._graphs.clear()
        self._builder.shutdown()
        self._opener.shutdown()
