"""Whole training steps of candidate placements: built on the region's copy, timed side by side, cached.

Each candidate is applied to its own copy of the region (``region_copy``) with the pass's own
``paint`` / ``refine`` / ``rebuild``; the gradient of the objectives (the loss) with respect to
the trainable variables' substitutes is taken as TF1 optimizers take it (gated per op), a
momentum update with rate 0 consumes it, and these steps are timed in interleaved rounds, each
with the noise of its comparison with a reference step (``stopwatch``).

Two batches are timed per decision (``StepBatch``): the close candidates of the search
(``COMPARE``) and the chosen placement beside all float32 and static (``CHECK``, ``step_check``).
They are cached apart: each result is only comparable with the steps timed in the same rounds.
"""

import dataclasses
import enum
import hashlib
import warnings
from typing import Dict, List, Optional, Sequence

import tensorflow as tf

from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement.candidate import Candidate, apply_placement
from slim_mp.graph_pass.placement.context import SearchContext
from slim_mp.graph_pass.placement.options import PlacementOptions
from slim_mp.graph_pass.placement.region_copy import RegionCopy
from slim_mp.graph_pass.placement.target import MeasuringTarget
from slim_mp.graph_pass.placement.stopwatch import (StillOpen, Timed, first_values, interleaved_ms, random_variable, timed_against,
                                                    variable_like, variables_initializer)
from slim_mp.graph_pass.rebuild import rebuild_low_precision
from slim_mp.graph_pass.refine import painted_low_ops
from slim_mp.graph_pass.region import select_region

# What building or running a candidate's step can raise; any of them means "decide on the estimate".
_STEP_ERRORS = (tf.errors.OpError, ValueError, TypeError, LookupError)


class StepBatch(enum.StrEnum):
    """Which batch of whole steps is timed; its value starts the batch's cache keys (``step|...``)."""

    COMPARE = "step"
    CHECK = "check"


@dataclasses.dataclass
class CandidateStep:
    """One candidate's step, ready to run: ``session.run(target)`` runs forward, backward and the updates.

    ``target``'s first value is the first objective (the loss); ``substitutes`` maps each replaced
    tensor's name to the read of the variable standing in for it (``stopwatch.load_variables`` sets
    values there to reproduce a batch).
    """

    session: tf.compat.v1.Session
    target: tf.Tensor
    substitutes: Dict[str, tf.Tensor]


def _apply_with_zero_rate(value: tf.Tensor, gradient) -> tf.Operation:
    """A momentum update of the variable read by ``value`` with learning rate 0 (the weights stay put).

    Training consumes every float32 gradient in full in its update, so does this; a momentum step
    (slim's most common optimizer family) also costs about what training's does.
    """
    if isinstance(gradient, tf.IndexedSlices):
        gradient = tf.convert_to_tensor(gradient)
    # Not zeros: grappler would fold a zeros initialiser into a constant as large as the weights.
    accumulator = variable_like(value)
    return tf.raw_ops.ResourceApplyMomentum(var=value.op.inputs[0], accum=accumulator.op.inputs[0],
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
        init = variables_initializer()
    session = target.session(graph)
    session.run(init)
    return CandidateStep(session, step, input_map)


def until_settled(options: PlacementOptions, reference: int) -> StillOpen:
    """Rounds go on for all steps while any step's verdict against step ``reference`` is not settled
    (``PlacementOptions.settled``); a reference that did not run leaves them all to the last round."""

    def still_open(times: List[List[float]]) -> List[int]:
        everyone = list(range(len(times)))
        if not 0 <= reference < len(times) or not times[reference]:
            return everyone
        settled = all(options.settled(values, times[reference]) for index, values in enumerate(times)
                      if values and index != reference)
        return [] if settled else everyone

    return still_open


def time_candidate_steps(copy: RegionCopy, config: PaintConfig, candidates: Sequence[Candidate],
                         options: PlacementOptions = PlacementOptions(), runs: int = 7,
                         reference: int = 0) -> List[Optional[Timed]]:
    """One step of each candidate timed in up to ``runs`` interleaved rounds (after ``options.step_warmup``
    untimed ones, on ``options.target``), fewer once every step's verdict against candidate
    ``reference`` is settled: its fastest milliseconds and the noise of comparing it with candidate
    ``reference``; None for one that fails to run."""
    steps: List[CandidateStep] = []
    try:
        for candidate in candidates:
            steps.append(build_candidate_step(copy, config, candidate, options.target))
        rounds = interleaved_ms([step.session.make_callable(step.target) for step in steps], options.step_warmup,
                                runs, until_settled(options, reference))
        return timed_against(rounds, reference)
    finally:
        for step in steps:
            step.session.close()


def step_runs(context: SearchContext, candidates: Sequence[Candidate]) -> int:
    """Timed rounds that fit ``options.step_timing_ms`` for all candidates, within the options' bounds."""
    options = context.options
    longest_ms = max(context.estimate(c) for c in candidates)
    fitting = options.step_timing_ms / (longest_ms * len(candidates) or 1.0)
    return int(min(options.max_step_runs, max(options.min_step_runs, fitting)))


def steps_timed(context: SearchContext, candidates: Sequence[Candidate], reference: int,
                batch: StepBatch) -> Optional[List[Optional[Timed]]]:
    """Each candidate's whole step and its noise against candidate ``reference``; None (with a warning)
    when timing failed or no region copy exists.

    From the cache when all are there; if one is missing, all are timed again in the same rounds,
    so that they are compared under the same load. A candidate whose step does not run is None.
    """
    copy, options = context.copy, context.options
    if copy is None:
        return None
    digest = copy.digest()
    keys = [f"{batch.value}|{digest}|"
            + hashlib.sha1("|".join(sorted(context.estimate.painted(c)[1])).encode()).hexdigest()[:20]
            for c in candidates]
    stored = [context.cache.get(key) for key in keys]
    if all(value and len(value) == 2 for value in stored):
        return [Timed(*value) for value in stored]
    runs = step_runs(context, candidates)
    measure = options.measure_steps or (lambda timed, base: time_candidate_steps(
        copy, context.config, timed, options, runs=runs, reference=base))
    try:
        times = measure(candidates, reference)
    except _STEP_ERRORS as error:
        warnings.warn(f"placement: timing whole steps failed ({type(error).__name__}: {error}); deciding on "
                      "the per-op estimate.", stacklevel=3)
        return None
    if not any(times):
        warnings.warn("placement: no candidate's whole step ran; deciding on the per-op estimate.", stacklevel=3)
    context.cache.add({key: [timed.ms, timed.noise] for key, timed in zip(keys, times) if timed})
    return list(times)
