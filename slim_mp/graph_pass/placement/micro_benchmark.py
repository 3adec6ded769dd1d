"""Per-op micro-benchmarks: one signature's forward (and backward) op timed alone, in float32 and low.

Per signature, a tiny standalone graph runs the forward op and the backprop ops its gradient
creates (``Conv2DBackpropInput``/``Filter``, ...), once in float32 and once in the low type (inputs
already low: the op's own cost), all in one standalone session (``MeasuringTarget.op_session``),
warmed up, then ``runs`` interleaved rounds (each float32 variant beside its low twin, alternating
which goes first): the fastest of each, and the noise of the low/float32 comparison from the
spread of the per-round ratios (``slim_mp.timing.relative_noise``). A cast pair (to low and back) is
timed the same way for the cast cost model. The signatures' inputs are shared where their shape
and type are (``SharedInputs``).
"""

import collections
import dataclasses
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf
from tensorflow.python.framework import op_def_registry

from slim_mp.graph_pass.placement.signatures import CAST, OpSignature, OpTiming
from slim_mp.graph_pass.placement.target import MeasuringTarget
from slim_mp.graph_pass.placement.timing_graphs import (first_values, random_variable, variable_of,
                                                        variables_initializer)
from slim_mp.timing import StillOpen, interleaved_ms, timed_against

# settled(low rounds, float32 rounds) -> whether the pair's verdict is clear enough to stop timing it.
Settled = Callable[[Sequence[float], Sequence[float]], bool]
# read(shape, dtype) -> the read of a random variable for one input of the signature being built.
RandomRead = Callable[[Sequence[int], tf.DType], tf.Tensor]


class SharedInputs:
    """The random variables of one micro-benchmark graph, shared by the signatures that need one of the
    same shape and type.

    Every ``random_variable`` of one shape and type holds the same values (one block of normals,
    repeated), so sharing changes no op's input; it halves what a ResNet-50's graph builds and
    initialises (162 variables, 456 MB -> 84, 234 MB). Within one signature each input keeps a
    variable of its own (``for_signature``): an op reading one tensor twice would get a gradient
    summing two paths, an extra op in what is timed.
    """

    def __init__(self) -> None:
        self._reads: Dict[Tuple[Tuple[int, ...], tf.DType], List[tf.Tensor]] = {}

    def for_signature(self) -> RandomRead:
        """A reader for one signature's inputs: its n-th input of a shape and type gets the n-th shared variable."""
        uses: collections.Counter = collections.Counter()

        def read(shape: Sequence[int], dtype: tf.DType) -> tf.Tensor:
            key = (tuple(shape), dtype)
            same = self._reads.setdefault(key, [])
            if uses[key] == len(same):
                same.append(random_variable(shape, dtype))
            uses[key] += 1
            return same[uses[key] - 1]

        return read


def _op_inputs(signature: OpSignature, dtype: tf.DType, read: RandomRead) -> Tuple[list, list]:
    """Flat inputs of the op (variables' reads for data, constants otherwise) and the data tensors."""
    by_index: Dict[int, tf.Tensor] = {index: tf.constant(value, tf.int32) for index, value in signature.constant_inputs}
    data = []
    shapes = iter(signature.input_shapes)
    total = len(signature.input_shapes) + len(signature.constant_inputs)
    for index in range(total):
        if index not in by_index:
            by_index[index] = read(next(shapes), dtype)
            data.append(by_index[index])
    return [by_index[i] for i in range(total)], data


def _build_op(signature: OpSignature, flat_inputs: list) -> tf.Tensor:
    """Create the op of ``signature`` on ``flat_inputs`` through ``tf.raw_ops``; its first output."""
    op_def = op_def_registry.get(signature.op_type)
    kwargs = dict(signature.attrs)
    position = 0
    for arg in op_def.input_arg:
        if arg.number_attr:
            count = kwargs.pop(arg.number_attr)
            kwargs[arg.name] = flat_inputs[position:position + count]
            position += count
        else:
            kwargs[arg.name] = flat_inputs[position]
            position += 1
    result = getattr(tf.raw_ops, signature.op_type)(**kwargs)
    return result[0] if isinstance(result, (list, tuple)) else result


def _train_target(signature: OpSignature, dtype: tf.DType, training: bool, read: RandomRead = random_variable
                  ) -> tf.Tensor:
    """One forward (and backward, when ``training``) of the op in ``dtype``, its inputs from ``read``; a small
    tensor to fetch."""
    if signature.op_type == CAST:
        (elements,) = signature.input_shapes[0]
        source = variable_of(tf.zeros([elements], tf.float32))
        low = variable_of(tf.zeros([elements], dtype))
        return first_values([tf.cast(source, dtype), tf.cast(low, tf.float32)])
    flat_inputs, data = _op_inputs(signature, dtype, read)
    output = _build_op(signature, flat_inputs)
    if not training:
        return first_values([output])
    upstream = read(output.shape.as_list(), dtype)
    gradients = [g for g in tf.gradients(output, data, grad_ys=upstream) if g is not None]
    return first_values([output, *gradients])


def open_pairs(settled: Settled) -> StillOpen:
    """Rounds go on for each float32 / low pair (callables ``2i``, ``2i + 1``) until ``settled`` says it is."""

    def still_open(times: List[List[float]]) -> List[int]:
        pairs = range(0, len(times) - 1, 2)
        return [index for first in pairs if times[first] and times[first + 1]
                and not settled(times[first + 1], times[first]) for index in (first, first + 1)]

    return still_open


@dataclasses.dataclass(frozen=True)
class PairRounds:
    """How the pairs are timed: ``warmup`` untimed runs each, then up to ``runs`` rounds, fewer for a
    pair once ``settled(low rounds, float32 rounds)`` says its two times are far enough apart
    (``NoiseRule.settled``; None: all ``runs``). ``before_rounds`` is called between the
    warm-ups and the first timed round (``interleaved_ms``). The values come from
    ``PlacementOptions`` (``timing_cache.timings_for``): no defaults here to contradict them."""

    warmup: int
    runs: int
    settled: Optional[Settled]
    before_rounds: Optional[Callable[[], object]] = None


def micro_benchmark(signatures: Sequence[OpSignature], precision: tf.DType, target: MeasuringTarget,
                    rounds: PairRounds) -> Dict[OpSignature, OpTiming]:
    """Time each signature in float32 and in ``precision`` (a cast pair: low only) in one standalone
    session, in ``rounds``.

    The ops run on ``target``'s device with its session options, forward and backward when it trains.

    A signature TensorFlow cannot build or run here (no kernel, unsupported data format) is left out.
    """
    graph = tf.Graph()
    targets: Dict[OpSignature, Tuple[tf.Tensor, tf.Tensor]] = {}
    inputs = SharedInputs()
    with graph.as_default(), tf.device(target.local_device() or None):
        for signature in signatures:
            try:
                with tf.name_scope(signature.op_type):
                    targets[signature] = (_train_target(signature, tf.float32, target.training, inputs.for_signature()),
                                          _train_target(signature, precision, target.training, inputs.for_signature()))
            except (TypeError, ValueError, LookupError, tf.errors.OpError):
                continue
        init = variables_initializer()
    timings: Dict[OpSignature, OpTiming] = {}
    with target.op_session(graph) as session:
        session.run(init)
        flat = [session.make_callable(fetch) for pair in targets.values() for fetch in pair]
        times = interleaved_ms(flat, rounds.runs, warmup=rounds.warmup, dropped_on=(tf.errors.OpError,),
                               still_open=open_pairs(rounds.settled) if rounds.settled else None,
                               before_rounds=rounds.before_rounds)
        for index, signature in enumerate(targets):
            float32_rounds, low_rounds = times[2 * index], times[2 * index + 1]
            if float32_rounds is None or low_rounds is None:
                continue
            _, low = timed_against([float32_rounds, low_rounds], reference=0)
            float32_ms = 0.0 if signature.op_type == CAST else min(float32_rounds)
            timings[signature] = OpTiming(float32_ms, low.ms, 0.0 if signature.op_type == CAST else low.noise)
    return timings
