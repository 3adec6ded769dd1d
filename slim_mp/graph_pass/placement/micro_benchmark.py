"""Per-op micro-benchmarks: one signature's forward (and backward) op timed alone, in float32 and low.

Per signature, a tiny standalone graph runs the forward op and the backprop ops its gradient
creates (``Conv2DBackpropInput``/``Filter``, ...), once in float32 and once in the low type (inputs
already low: the op's own cost), all in one standalone session (``MeasuringTarget.op_session``),
warmed up, then ``runs`` interleaved rounds (each signature's float32 parts beside its low ones,
the order alternating): the fastest of each, and the noise of the low/float32 comparison from the
spread of the per-round ratios (``slim_mp.timing.relative_noise``). Op types whose gradients may
each take their own kernel (``gradient_kernels.GRADIENT_ROLES``: convolutions, products) are timed
by parts when training: the forward op, each gradient alone, and a pointwise convolution's filter
gradient as a low matrix product, so that ``kernel_choice`` can pick the fastest per gradient. A
cast pair (to low and back) is timed the same way for the cast cost model. The signatures' inputs
are shared where their shape and type are (``SharedInputs``).
"""

import collections
import dataclasses
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_def_registry
from tensorflow.python.framework import ops as framework_ops

from slim_mp.graph_pass.gradient_kernels import GradientKernel, gradient_roles, kernels_for, matmul_filter_gradient
from slim_mp.graph_pass.placement.signatures import CAST, GradientTiming, OpSignature, OpTiming
from slim_mp.graph_pass.placement.target import MeasuringTarget
from slim_mp.graph_pass.placement.timing_graphs import (first_value, first_values, random_variable, variable_of,
                                                        variables_initializer)
from slim_mp.timing import StillOpen, interleaved_ms, relative_noise, timed_against

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
    """Flat inputs of the op (variables' reads for data in ``dtype`` and for side inputs in float32, constants
    otherwise) and the data tensors."""
    by_index: Dict[int, tf.Tensor] = {index: tf.constant(value, tf.int32) for index, value in signature.constant_inputs}
    by_index.update({index: read(shape, tf.float32) for index, shape in signature.side_inputs})
    data = []
    shapes = iter(signature.input_shapes)
    total = len(signature.input_shapes) + len(signature.constant_inputs) + len(signature.side_inputs)
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


def _whole_target(signature: OpSignature, dtype: tf.DType, training: bool, read: RandomRead) -> tf.Tensor:
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


def _piece_targets(signature: OpSignature, dtype: tf.DType, read: RandomRead, with_matmul: bool
                   ) -> Dict[str, tf.Tensor]:
    """The forward op and each of its gradients alone, in ``dtype`` (TensorFlow's own kernels), by label
    (``forward``, then each role of ``gradient_roles``, ``<role>/matmul`` where a pointwise filter takes one).

    A gradient's fetch needs only its own backprop op: the forward op is built but never runs."""
    flat_inputs, _ = _op_inputs(signature, dtype, read)
    output = _build_op(signature, flat_inputs)
    upstream = read(output.shape.as_list(), dtype)
    gradients = framework_ops.get_gradient_function(output.op)(output.op, upstream)
    targets = {"forward": first_value(output)}
    alternatives = {}
    attrs = dict(signature.attrs)
    for role, gradient in zip(gradient_roles(signature.op_type), gradients):
        targets[role] = first_value(gradient)
        if with_matmul and GradientKernel.MATMUL in kernels_for(signature.op_type, role, attrs,
                                                                signature.input_shapes):
            alternatives[f"{role}/{GradientKernel.MATMUL}"] = first_value(matmul_filter_gradient(output.op, upstream))
    return {**targets, **alternatives}


@dataclasses.dataclass(frozen=True)
class _Timed:
    """One signature's timed fetches, by label per type (``float32`` and ``low``): the whole op (``whole``) or
    its parts (``forward`` and each gradient role)."""

    float32: Dict[str, tf.Tensor]
    low: Dict[str, tf.Tensor]


def _timed_fetches(signature: OpSignature, precision: tf.DType, training: bool, inputs: SharedInputs) -> _Timed:
    """What to time for ``signature``: its parts when training an op type whose gradients each take their own
    kernel (``gradient_roles``), else the whole op (forward, and backward when training)."""
    if training and gradient_roles(signature.op_type):
        return _Timed(_piece_targets(signature, tf.float32, inputs.for_signature(), with_matmul=False),
                      _piece_targets(signature, precision, inputs.for_signature(), with_matmul=True))
    return _Timed({"whole": _whole_target(signature, tf.float32, training, inputs.for_signature())},
                  {"whole": _whole_target(signature, precision, training, inputs.for_signature())})


def _summed(rounds: Sequence[Sequence[float]]) -> List[float]:
    """Per round, the sum over the parts timed in it."""
    return [sum(values) for values in zip(*rounds)]


def _timing_of(signature: OpSignature, float32: Dict[str, List[float]], low: Dict[str, List[float]]) -> OpTiming:
    """The ``OpTiming`` of one signature's rounds by label (see ``_Timed``): each part's fastest, summed; the
    noise from the per-round sums of the parts both types ran."""
    is_cast = signature.op_type == CAST
    if "whole" in low:
        _, timed = timed_against([float32["whole"], low["whole"]], reference=0)
        return OpTiming(0.0 if is_cast else min(float32["whole"]), timed.ms, 0.0 if is_cast else timed.noise)
    roles = gradient_roles(signature.op_type)
    parts = ("forward",) + roles
    noise = relative_noise(_summed([low[part] for part in parts]), _summed([float32[part] for part in parts]))
    matmul = {role: f"{role}/{GradientKernel.MATMUL}" for role in roles}
    gradients = tuple(GradientTiming(role, min(float32[role]), min(low[role]),
                                     min(low[matmul[role]]) if matmul[role] in low else None) for role in roles)
    return OpTiming(sum(min(float32[part]) for part in parts), sum(min(low[part]) for part in parts), noise,
                    gradients)


def open_groups(groups: Sequence[Tuple[Sequence[int], Sequence[int]]], settled: Settled) -> StillOpen:
    """Rounds go on for each signature's callables (its float32 indices, then its low ones, the parts both
    types time first and in the same order) until ``settled(low total, float32 total)``, per round, says
    its verdict is clear."""

    def still_open(times: List[List[float]]) -> List[int]:
        going = []
        for float32, low in groups:
            everyone = list(float32) + list(low)
            if all(times[index] for index in everyone) and settled(
                    _summed([times[index] for index in low[:len(float32)]]),
                    _summed([times[index] for index in float32])):
                continue
            going.extend(everyone)
        return going

    return still_open


@dataclasses.dataclass(frozen=True)
class PairRounds:
    """How the pairs are timed: ``warmup`` untimed runs each, then up to ``runs`` rounds, fewer for a
    pair once ``settled(low rounds, float32 rounds)`` says its two times are far enough apart
    (``NoiseRule.settled``; None: all ``runs``). ``before_rounds`` is called between the
    warm-ups and the first timed round (``interleaved_ms``). ``max_elements``: a batched op whose
    first input holds more is timed on fewer of its examples (``timed_signature``). The values come
    from ``PlacementOptions`` (``timing_cache.timings_for``): no defaults here to contradict them."""

    warmup: int
    runs: int
    settled: Optional[Settled]
    before_rounds: Optional[Callable[[], object]] = None
    max_elements: Optional[int] = None


def timed_signature(signature: OpSignature, max_elements: Optional[int]) -> Tuple[OpSignature, float]:
    """The signature to time for ``signature`` and the factor its times are then scaled by.

    A convolution's or product's time grows with its batch (the first dimension of its first input),
    and its float32 / low ratio hardly does: one whose first input holds more than ``max_elements``
    is timed on as many of its examples as fit (at least one), its times multiplied by its batch over
    them, so a cold pass at batch 32 costs what one at batch 8 does. Others are timed as they are.
    """
    transposed = dict(signature.attrs).get("transpose_a", False)
    if max_elements is None or not gradient_roles(signature.op_type) or transposed or not signature.input_shapes:
        return signature, 1.0
    batch, *example = signature.input_shapes[0]
    per_example = int(np.prod(example, dtype=np.int64)) if example else 1
    if batch <= 1 or batch * per_example <= max_elements:
        return signature, 1.0
    timed_batch = max(1, max_elements // per_example)
    shapes = ((timed_batch, *example),) + tuple(signature.input_shapes[1:])
    return dataclasses.replace(signature, input_shapes=shapes), batch / timed_batch


def _scaled(timing: OpTiming, factor: float) -> OpTiming:
    """``timing`` with every time multiplied by ``factor`` (its noise, a fraction, unchanged)."""
    if factor == 1.0:
        return timing
    gradients = tuple(dataclasses.replace(g, float32_ms=g.float32_ms * factor, low_ms=g.low_ms * factor,
                                          matmul_ms=None if g.matmul_ms is None else g.matmul_ms * factor)
                      for g in timing.gradients)
    return OpTiming(timing.float32_ms * factor, timing.low_ms * factor, timing.noise, gradients)


def _flattened(fetched: Iterable[_Timed]) -> Tuple[List[tf.Tensor], List[Tuple[List[int], List[int]]]]:
    """Every fetch of ``fetched`` in one list, and per signature the indexes of its float32 and its low ones."""
    flat: List[tf.Tensor] = []
    groups: List[Tuple[List[int], List[int]]] = []
    for timed in fetched:
        float32 = list(range(len(flat), len(flat) + len(timed.float32)))
        flat.extend(timed.float32.values())
        low = list(range(len(flat), len(flat) + len(timed.low)))
        flat.extend(timed.low.values())
        groups.append((float32, low))
    return flat, groups


def micro_benchmark(signatures: Sequence[OpSignature], precision: tf.DType, target: MeasuringTarget,
                    rounds: PairRounds) -> Dict[OpSignature, OpTiming]:
    """Time each signature in float32 and in ``precision`` (a cast pair: low only) in one standalone
    session, in ``rounds``.

    The ops run on ``target``'s device with its session options, forward and backward when it trains;
    an op type whose gradients each take their own kernel is timed by parts (forward, each gradient,
    the matrix-product filter gradient of a pointwise convolution), so that ``kernel_choice`` can pick.

    A signature TensorFlow cannot build or run here (no kernel, unsupported data format) is left out.
    """
    graph = tf.Graph()
    fetched: Dict[OpSignature, _Timed] = {}
    inputs = SharedInputs()
    timed_as = {signature: timed_signature(signature, rounds.max_elements) for signature in signatures}
    with graph.as_default(), tf.device(target.local_device() or None):
        for signature in dict.fromkeys(timed for timed, _ in timed_as.values()):
            try:
                with tf.name_scope(signature.op_type):
                    fetched[signature] = _timed_fetches(signature, precision, target.training, inputs)
            except (TypeError, ValueError, LookupError, tf.errors.OpError):
                continue
        init = variables_initializer()
    flat, groups = _flattened(fetched.values())
    timings: Dict[OpSignature, OpTiming] = {}
    with target.op_session(graph) as session:
        session.run(init)
        callables = [session.make_callable(fetch) for fetch in flat]
        times = interleaved_ms(callables, rounds.runs, warmup=rounds.warmup, dropped_on=(tf.errors.OpError,),
                               still_open=open_groups(groups, rounds.settled) if rounds.settled else None,
                               before_rounds=rounds.before_rounds)
    for (signature, timed), (float32, low) in zip(fetched.items(), groups):
        float32_rounds = dict(zip(timed.float32, (times[index] for index in float32)))
        low_rounds = dict(zip(timed.low, (times[index] for index in low)))
        if any(values is None for values in list(float32_rounds.values()) + list(low_rounds.values())):
            continue
        timings[signature] = _timing_of(signature, float32_rounds, low_rounds)
    return {signature: _scaled(timings[timed], factor) for signature, (timed, factor) in timed_as.items()
            if timed in timings}
