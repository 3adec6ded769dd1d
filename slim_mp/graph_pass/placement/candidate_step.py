"""One candidate's whole training step, built on the region's copy, and the pool that keeps built steps open.

The candidate is applied to its own copy of the region (``region_copy``) with the pass's own
``paint`` / ``refine`` / ``rebuild``; the gradient of the objectives (the loss) with respect to
the trainable variables' substitutes is taken as TF1 optimizers take it (gated per op), and a
momentum update with rate 0 consumes it. Building a ResNet-50 step takes seconds, so a built
step stays open in its ``StepPool`` until the decision is made: the check times again the steps
the search already built.
"""

import dataclasses
from typing import Dict, Iterable

import tensorflow as tf

from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement.candidate import Candidate, apply_placement
from slim_mp.graph_pass.placement.region_copy import RegionCopy
from slim_mp.graph_pass.placement.stopwatch import first_values, random_variable, variable_like, variables_initializer
from slim_mp.graph_pass.placement.target import MeasuringTarget
from slim_mp.graph_pass.rebuild import rebuild_low_precision
from slim_mp.graph_pass.refine import painted_low_ops
from slim_mp.graph_pass.region import select_region


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


class StepPool:
    """The built steps of one region copy, by candidate: each built once, open until ``close``."""

    def __init__(self, copy: RegionCopy, config: PaintConfig, target: MeasuringTarget) -> None:
        self.copy, self.config, self.target = copy, config, target
        self._steps: Dict[Candidate, CandidateStep] = {}

    def step(self, candidate: Candidate) -> CandidateStep:
        """``candidate``'s step, built now unless an equal candidate's already is."""
        if candidate not in self._steps:
            self._steps[candidate] = build_candidate_step(self.copy, self.config, candidate, self.target)
        return self._steps[candidate]

    def keep_only(self, candidates: Iterable[Candidate]) -> None:
        """Close the steps of all but ``candidates`` (their memory is a whole step's each)."""
        kept = set(candidates)
        for candidate in [c for c in self._steps if c not in kept]:
            self._steps.pop(candidate).session.close()

    def close(self) -> None:
        """Close every step's session."""
        self.keep_only(())
