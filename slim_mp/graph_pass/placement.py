"""Measured placement: keep float32 where low precision does not pay on the device the pass targets.

The static tables say "conv and matmul always run low". On a CPU that is true for large inputs
(oneDNN's bfloat16 convolutions are ~1.7x faster at 224 px) and false for small ones (at 32 px
they are slower than float32). So, before painting, the pass times each *allow* op that the
static painting would make low, with its real shapes and attributes, on this device:

* per op signature, a tiny standalone graph runs the forward op and the backprop ops its gradient
  creates (``Conv2DBackpropInput``/``Filter``, ...), once in float32 and once in the low type
  (inputs already low: the op's own cost), all in one standalone session, warmed up, fastest of a few
  round-robin runs;
* a Cast costs ``a + b * elements`` (fitted from two sizes, forward cast plus its gradient's cast).

The search starts from an estimate. For a placement (a set of allow ops demoted to float32) the
painting rules run as usual, and the estimate is the allow ops' times (low or float32 as painted)
plus the casts that painting implies (``planned_conversions``). Demoting one op in the middle of a
low region costs two casts each way, so deciding per op alone would create cast ping-pong; the
candidates are therefore the static placement, the per-op one (every op slower in low demoted),
everything in float32, and the best found by flipping whole connected low regions, each with low
times counted as measured and with a 20% margin (``LOW_PRECISION_MARGIN``).

The estimate leaves out what goes low around the allow ops (batch norms, activations, pooling),
oneDNN's layout reorders and fusions, and how the ops overlap; on small networks that decides (the
estimate once kept cifarnet's fully connected layers float32 although each was faster low). So the
candidates within ``VERIFY_WINDOW`` of the best estimate, each with its twin that keeps the tail
after the last allow op low (``refine`` demotes it to save casts, which splits conv + bias + relu
fusions), are timed as whole training steps on standalone copies of the region
(``candidate_steps``), and the fastest step wins. Candidates that all estimate within 1% of each
other are not timed: they differ by less than the timing's noise. The winner's demoted ops become
fixed-float32 reasons fed into ``paint`` ("slower in bfloat16 on this device: X ms vs Y ms"), so
deny taint, clear/infer spreading and minimal casts still apply.

Timings are cached on disk (``$SLIM_MP_CACHE_DIR`` or ``~/.cache/slim_mp/placement``), keyed by the
device description, the TensorFlow version, the precision and the op signature (whole steps: the
region copy's digest and the candidate's low ops), so a second build measures nothing. A decisions
file (``placement.json`` in a training run's folder) pins the demoted ops (and the tail) of a run,
so a resumed run and every worker of a cluster build the same graph.
"""

import dataclasses
import hashlib
import json
import os
import time
import warnings
from typing import Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_def_registry

from slim_mp.devices import detect_device
from slim_mp.json_files import write_json_atomically
from slim_mp.graph_pass.candidate_steps import StepCandidate, copy_region, time_candidate_steps
from slim_mp.graph_pass.conversions import planned_conversions
from slim_mp.graph_pass.op_ports import op_ports
from slim_mp.graph_pass.paint import LOW, PaintConfig, paint
from slim_mp.graph_pass.refine import painted_low_ops
from slim_mp.graph_pass.region import Region
from slim_mp.graph_pass.stopwatch import fastest_ms, first_values, random_variable

PLACEMENTS = ("measured", "static")
PLACEMENT_ENV = "SLIM_MP_PLACEMENT"
CACHE_ENV = "SLIM_MP_CACHE_DIR"
DECISIONS_FILE_NAME = "placement.json"
_CAST = "Cast"
# Element counts of the two casts timed to fit the cast cost model.
_CAST_SIZES = (1 << 14, 1 << 20)
_POLL_SECONDS = 0.5
# Low precision must win by this fraction: the estimate leaves out what goes low around the allow ops
# (batch norm, pooling, activations) and oneDNN's layout reorders, which cost time at small sizes.
LOW_PRECISION_MARGIN = 0.20
# Candidates whose estimate is within this fraction of the best are timed as whole steps (at most
# MAX_TIMED_CANDIDATES of them): the estimate misses by up to ~20% on small networks.
VERIFY_WINDOW = 0.35
MAX_TIMED_CANDIDATES = 6
# Candidates whose estimates all lie within this fraction of each other are not timed: they differ in a
# few tiny ops (ResNet-50 at 224 px: 0.05%), less than the timing's noise.
MIN_TIMED_SPREAD = 0.01
# Timed runs of each candidate's step: as many as fit in STEP_TIMING_MS for all candidates, between
# MIN_STEP_RUNS (a cold ResNet-50 at 224 px) and MAX_STEP_RUNS (small steps, where candidates differ
# by a few percent and more runs separate them).
STEP_TIMING_MS = 5000.0
MIN_STEP_RUNS = 3
MAX_STEP_RUNS = 21
# A placement with low-precision ops must beat the all-float32 step by this fraction when both were
# timed: a smaller win is within the timing's noise, and float32 is then the safe choice.
MIN_WIN_OVER_FLOAT32 = 0.01


def default_placement() -> str:
    """``measured``, unless ``$SLIM_MP_PLACEMENT`` names another placement (the test suite sets ``static``)."""
    return resolve_placement(os.environ.get(PLACEMENT_ENV) or "measured")


def resolve_placement(placement: Optional[str]) -> str:
    """``placement`` checked against ``PLACEMENTS`` (None: the default); ValueError naming the accepted values."""
    if placement is None:
        return default_placement()
    if placement not in PLACEMENTS:
        raise ValueError(f"placement={placement!r} is not a placement; use 'measured' or 'static'.")
    return placement


@dataclasses.dataclass(frozen=True)
class OpSignature:
    """What an op's speed depends on: its type, data-input shapes, constant inputs and attributes."""

    op_type: str
    input_shapes: Tuple[Tuple[int, ...], ...]
    constant_inputs: Tuple[Tuple[int, Tuple[int, ...]], ...] = ()
    attrs: Tuple[Tuple[str, object], ...] = ()

    def key(self) -> str:
        """A stable text key for the cache."""
        return json.dumps([self.op_type, self.input_shapes, self.constant_inputs, self.attrs], default=str)


@dataclasses.dataclass(frozen=True)
class OpTiming:
    """Milliseconds of one forward + backward of a signature in float32 and in the low type."""

    float32_ms: float
    low_ms: float


# measure(signatures, precision) -> timing per signature; signatures it cannot time are left out.
Measure = Callable[[Sequence[OpSignature], tf.DType], Dict[OpSignature, OpTiming]]
# measure_steps(candidates) -> milliseconds of one whole step per candidate, None for one that does not run.
MeasureSteps = Callable[[Sequence[StepCandidate]], List[Optional[float]]]


@dataclasses.dataclass(frozen=True)
class PlacementOptions:
    """Where timings and decisions live, and how to measure.

    ``cache_dir``: the timing cache (default ``$SLIM_MP_CACHE_DIR`` or ``~/.cache/slim_mp/placement``).
    ``decisions_file``: reuse the demoted ops recorded there; if it does not exist, measure and (when
    ``write_decisions``) write it. A reader that may not write (a non-chief worker) waits up to
    ``wait_seconds`` for the writer. ``measure`` replaces the micro-benchmarks (tests pass fake timings).
    ``training``: time the backprop ops too (the pass is run before gradients are taken).
    ``time_steps``: time close candidates as whole steps (``candidate_steps``); False decides on the
    per-op estimate alone. ``measure_steps`` replaces that timing (tests). ``warmup`` / ``runs``: the
    micro-benchmarks' untimed and timed runs (whole steps get as many runs as fit ``STEP_TIMING_MS``).
    """

    cache_dir: Optional[str] = None
    decisions_file: Optional[str] = None
    write_decisions: bool = True
    wait_seconds: float = 0.0
    measure: Optional[Measure] = None
    time_steps: bool = True
    measure_steps: Optional[MeasureSteps] = None
    training: bool = True
    warmup: int = 2
    runs: int = 7


@dataclasses.dataclass
class PlacementPlan:
    """The measured decision: allow ops kept in float32 (op name -> reason) and what it was based on."""

    float32_ops: Dict[str, str]
    low_ops: List[str]
    tail_low: bool = False
    estimated_ms: Optional[float] = None
    static_estimated_ms: Optional[float] = None
    float32_estimated_ms: Optional[float] = None
    measured_signatures: int = 0
    cached_signatures: int = 0
    candidates: List[dict] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    source: str = "measured"
    # False when nothing was timed and the static painting applies (a precision the device emulates).
    timed: bool = True

    def as_json(self) -> dict:
        """The plan as plain JSON values."""
        return dataclasses.asdict(self)


# --- signatures -------------------------------------------------------------------------------------


def _attr_value(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, (list, tuple)):
        return tuple(_attr_value(item) for item in value)
    return value


def op_signature(op: tf.Operation) -> Optional[OpSignature]:
    """The signature of ``op``, or None when a data shape is not static or a non-data input not constant."""
    ports = op_ports(op)
    shapes, constants = [], []
    for index, (tensor, is_data) in enumerate(zip(op.inputs, ports.data_inputs)):
        if is_data:
            if not tensor.shape.is_fully_defined():
                return None
            shapes.append(tuple(tensor.shape.as_list()))
            continue
        value = tf.get_static_value(tensor)
        if value is None:
            return None
        constants.append((index, tuple(np.asarray(value).ravel().tolist())))
    attrs = []
    for attr in op.op_def.attr:
        if attr.type in ("type", "list(type)"):
            continue
        attrs.append((attr.name, _attr_value(op.get_attr(attr.name))))
    return OpSignature(op.type, tuple(shapes), tuple(constants), tuple(sorted(attrs)))


def cast_signature(elements: int) -> OpSignature:
    """The pseudo-signature of a cast pair (to low and back) of ``elements`` values."""
    return OpSignature(_CAST, ((elements,),))


# --- micro-benchmarks -------------------------------------------------------------------------------


def _op_inputs(signature: OpSignature, dtype: tf.DType) -> Tuple[list, list]:
    """Flat inputs of the op (variables' reads for data, constants otherwise) and the data tensors."""
    by_index: Dict[int, tf.Tensor] = {index: tf.constant(value, tf.int32) for index, value in signature.constant_inputs}
    data = []
    shapes = iter(signature.input_shapes)
    total = len(signature.input_shapes) + len(signature.constant_inputs)
    for index in range(total):
        if index not in by_index:
            by_index[index] = random_variable(next(shapes), dtype)
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


def _train_target(signature: OpSignature, dtype: tf.DType, training: bool) -> tf.Tensor:
    """One forward (and backward, when ``training``) of the op in ``dtype``; a small tensor to fetch."""
    if signature.op_type == _CAST:
        (elements,) = signature.input_shapes[0]
        source = tf.Variable(tf.zeros([elements], tf.float32), trainable=False).read_value()
        low = tf.Variable(tf.zeros([elements], dtype), trainable=False).read_value()
        return first_values([tf.cast(source, dtype), tf.cast(low, tf.float32)])
    flat_inputs, data = _op_inputs(signature, dtype)
    output = _build_op(signature, flat_inputs)
    if not training:
        return first_values([output])
    upstream = random_variable(output.shape.as_list(), dtype)
    gradients = [g for g in tf.gradients(output, data, grad_ys=upstream) if g is not None]
    return first_values([output, *gradients])


def micro_benchmark(signatures: Sequence[OpSignature], precision: tf.DType, training: bool = True,
                    warmup: int = 2, runs: int = 7) -> Dict[OpSignature, OpTiming]:
    """Time each signature in float32 and in ``precision`` (a cast pair: low only) in one standalone session.

    A signature TensorFlow cannot build or run here (no kernel, unsupported data format) is left out.
    """
    graph = tf.Graph()
    targets: Dict[OpSignature, Tuple[tf.Tensor, tf.Tensor]] = {}
    with graph.as_default():
        for signature in signatures:
            try:
                with tf.name_scope(signature.op_type):
                    targets[signature] = (_train_target(signature, tf.float32, training),
                                          _train_target(signature, precision, training))
            except (TypeError, ValueError, LookupError, tf.errors.OpError):
                continue
        init = tf.compat.v1.global_variables_initializer()
    timings: Dict[OpSignature, OpTiming] = {}
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        flat = [session.make_callable(target) for pair in targets.values() for target in pair]
        fastest = iter(fastest_ms(flat, warmup, runs))
        for signature in targets:
            float32_ms, low_ms = next(fastest), next(fastest)
            if float32_ms is None or low_ms is None:
                continue
            timings[signature] = OpTiming(0.0 if signature.op_type == _CAST else float32_ms, low_ms)
    return timings


# --- the timing cache -------------------------------------------------------------------------------


def cache_dir(configured: Optional[str] = None) -> str:
    """The timing cache folder: ``configured``, else ``$SLIM_MP_CACHE_DIR``, else ``~/.cache/slim_mp/placement``."""
    return configured or os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "slim_mp",
                                                                   "placement")


def _cache_path(folder: str, device: str, precision: tf.DType) -> str:
    digest = hashlib.sha1(f"{device}|{tf.__version__}|{precision.name}".encode()).hexdigest()[:16]
    return os.path.join(folder, f"timings_{digest}.json")


def _read_json(path: str) -> Optional[dict]:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        warnings.warn(f"placement: ignoring unreadable file {path}", stacklevel=3)
        return None


class TimingCache:
    """Timings of one (device, TensorFlow version, precision) on disk: lists of milliseconds by text key."""

    def __init__(self, folder: str, device: str, precision: tf.DType):
        self.path = _cache_path(folder, device, precision)
        self._header = {"device": device, "tensorflow": tf.__version__, "precision": precision.name}
        stored = _read_json(self.path) or {}
        self._timings: Dict[str, List[float]] = stored.get("timings", {}) if stored.get("device") == device else {}

    def get(self, key: str) -> Optional[List[float]]:
        return self._timings.get(key)

    def add(self, timings: Mapping[str, List[float]]) -> None:
        """Store new timings, merged with what other processes wrote meanwhile; one atomic write."""
        if not timings:
            return
        latest = (_read_json(self.path) or {}).get("timings", {})
        latest.update(self._timings)
        latest.update(timings)
        self._timings = latest
        try:
            write_json_atomically(self.path, dict(self._header, timings=latest))
        except OSError as error:
            warnings.warn(f"placement: could not write the timing cache {self.path} ({error}); "
                          "the next build measures again.", stacklevel=3)


def timings_for(signatures: Sequence[OpSignature], cache: TimingCache, options: PlacementOptions,
                precision: tf.DType) -> Tuple[Dict[OpSignature, OpTiming], int, int]:
    """Timings of ``signatures`` from the cache, measuring (and caching) the missing ones.

    Returns:
      (timings, signatures measured now, signatures found in the cache).
    """
    unique = list(dict.fromkeys(signatures))
    found = {s: cache.get(s.key()) for s in unique}
    missing = [s for s, timing in found.items() if not timing]
    timings = {s: OpTiming(*t) for s, t in found.items() if t}
    if missing:
        measure = options.measure or (lambda sigs, p: micro_benchmark(sigs, p, options.training,
                                                                      options.warmup, options.runs))
        measured = measure(missing, precision)
        cache.add({s.key(): [t.float32_ms, t.low_ms] for s, t in measured.items()})
        timings.update(measured)
    return timings, len(missing), len(unique) - len(missing)


# --- the decision -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CastModel:
    """Milliseconds of a cast pair (forward cast and its gradient's) as ``fixed + per_element * n``."""

    fixed_ms: float
    per_element_ms: float

    def ms(self, elements: int) -> float:
        return self.fixed_ms + self.per_element_ms * elements


def fit_cast_model(timings: Mapping[OpSignature, OpTiming]) -> CastModel:
    """The line through the two timed cast sizes (never negative)."""
    small, large = (timings.get(cast_signature(n)) for n in _CAST_SIZES)
    if small is None or large is None:
        return CastModel(0.0, 0.0)
    slope = max(0.0, (large.low_ms - small.low_ms) / (_CAST_SIZES[1] - _CAST_SIZES[0]))
    return CastModel(max(0.0, small.low_ms - slope * _CAST_SIZES[0]), slope)


class _Estimator:
    """Estimated milliseconds of a train step's measured part for a set of demoted allow ops.

    Low times count ``margin`` more: what goes low around the allow ops is not timed.
    """

    def __init__(self, region: Region, config: PaintConfig, timings: Dict[tf.Operation, OpTiming],
                 casts: CastModel, margin: float = LOW_PRECISION_MARGIN):
        self.region, self.config, self.timings, self.casts, self.margin = region, config, timings, casts, margin
        self._memo: Dict[Tuple[frozenset, bool], Tuple[float, Set[tf.Operation]]] = {}

    def __call__(self, demoted: Set[tf.Operation], tail_low: bool = False) -> float:
        return self.painted(demoted, tail_low)[0]

    def painted(self, demoted: Set[tf.Operation], tail_low: bool = False) -> Tuple[float, Set[tf.Operation]]:
        """(estimated ms, low ops) of painting with ``demoted`` fixed to float32 (and the tail low)."""
        key = (frozenset(demoted), tail_low)
        if key not in self._memo:
            fixed = dict(self.config.fixed_float32)
            fixed.update({op.name: "placement candidate" for op in demoted})
            decisions, low = painted_low_ops(self.region, dataclasses.replace(
                self.config, fixed_float32=fixed, demote_tail=not tail_low))
            low_set = set(low)
            total = sum(t.low_ms * (1 + self.margin) if op in low_set else t.float32_ms
                        for op, t in self.timings.items())
            ports = {op: d.ports for op, d in decisions.items()}
            precision_size = self.config.precision.size
            for conversion in planned_conversions(low, ports, self.config.precision):
                if conversion.kind == "cast" and conversion.bytes_per_step:
                    total += self.casts.ms(conversion.bytes_per_step // (4 + precision_size))
            self._memo[key] = (total, low_set)
        return self._memo[key]


def _low_regions(low: Set[tf.Operation], allow: Set[tf.Operation]) -> List[Set[tf.Operation]]:
    """The allow ops of each connected region of low ops (connected through data edges between low ops)."""
    parent = {op: op for op in low}

    def root(op):
        while parent[op] is not op:
            parent[op] = parent[parent[op]]
            op = parent[op]
        return op

    for op in low:
        for tensor in op.inputs:
            if tensor.op in parent:
                parent[root(tensor.op)] = root(op)
    regions: Dict[tf.Operation, Set[tf.Operation]] = {}
    for op in allow & low:
        regions.setdefault(root(op), set()).add(op)
    return [regions[key] for key in sorted(regions, key=lambda r: min(o.name for o in regions[r]))]


def _slower(timing: OpTiming, margin: float = LOW_PRECISION_MARGIN) -> bool:
    return timing.low_ms * (1 + margin) >= timing.float32_ms


def choose_demoted(estimate: Callable[[Set[tf.Operation]], float], timings: Mapping[tf.Operation, OpTiming],
                   regions: Sequence[Set[tf.Operation]], margin: float = LOW_PRECISION_MARGIN) -> Set[tf.Operation]:
    """The set of allow ops to keep float32 with the lowest estimated step (see the module docstring)."""
    measured = set(timings)
    per_op = {op for op, t in timings.items() if _slower(t, margin)}
    best = min((set(), per_op, measured), key=lambda candidate: (estimate(candidate), len(candidate)))
    improved = True
    while improved:
        improved = False
        for region in regions:
            for candidate in (best | region, best - region):
                if candidate != best and estimate(candidate) < estimate(best) - 1e-9:
                    best, improved = candidate, True
    return best


@dataclasses.dataclass(frozen=True)
class PlacementCandidate:
    """A placement the search compares: the allow ops kept float32, and whether the tail stays low."""

    demoted: FrozenSet[tf.Operation]
    tail_low: bool = False


def _shortlist(estimates: Mapping[PlacementCandidate, float]) -> List[PlacementCandidate]:
    """The candidates worth timing as whole steps, best estimate first.

    Those within ``VERIFY_WINDOW`` of the best estimate, at most half of ``MAX_TIMED_CANDIDATES``
    (each may bring its tail-low twin): farther ones lose by more than the estimate can be wrong.
    """
    best = min(estimates.values())
    ranked = sorted(estimates, key=lambda c: (estimates[c], len(c.demoted), c.tail_low))
    return [c for c in ranked if estimates[c] <= best * (1 + VERIFY_WINDOW)][:MAX_TIMED_CANDIDATES // 2]


def _candidates(estimators: Sequence[_Estimator], timings: Mapping[tf.Operation, OpTiming],
                regions: Sequence[Set[tf.Operation]]) -> Dict[PlacementCandidate, List[str]]:
    """Placements worth comparing (all with the tail as ``refine`` leaves it), each with how it was found."""
    found: Dict[PlacementCandidate, List[str]] = {}
    found.setdefault(PlacementCandidate(frozenset()), []).append("static")
    found.setdefault(PlacementCandidate(frozenset(timings)), []).append("all float32")
    for estimator in estimators:
        margin = f"+{estimator.margin:.0%}"
        per_op = frozenset(op for op, t in timings.items() if _slower(t, estimator.margin))
        found.setdefault(PlacementCandidate(per_op), []).append(f"per op ({margin})")
        best = frozenset(choose_demoted(estimator, timings, regions, estimator.margin))
        found.setdefault(PlacementCandidate(best), []).append(f"estimated best ({margin})")
    return found


def _with_tail_twins(timed: List[PlacementCandidate], estimate: _Estimator) -> List[PlacementCandidate]:
    """``timed``, each followed by its twin with the tail kept low where that paints differently.

    ``refine`` demotes the tail after the last allow op to save casts, which also splits oneDNN's
    conv + bias + relu fusion; only timing tells which is faster.
    """
    result = []
    for candidate in timed:
        result.append(candidate)
        if estimate.painted(candidate.demoted, True)[1] != estimate.painted(candidate.demoted)[1]:
            result.append(PlacementCandidate(candidate.demoted, tail_low=True))
    return result[:MAX_TIMED_CANDIDATES]


def _worth_timing(timed: Sequence[PlacementCandidate], estimate: _Estimator) -> bool:
    """Whether the candidates' estimates differ by more than ``MIN_TIMED_SPREAD`` (less is below timing noise)."""
    estimates = [estimate(c.demoted, c.tail_low) for c in timed]
    return len(timed) > 1 and max(estimates) > min(estimates) * (1 + MIN_TIMED_SPREAD)


def _step_times(region: Region, config: PaintConfig, objectives: Sequence[tf.Tensor],
                timed: Sequence[PlacementCandidate], estimate: _Estimator, cache: TimingCache,
                options: PlacementOptions) -> Dict[PlacementCandidate, float]:
    """Milliseconds of one whole step per candidate, from the cache or timed side by side now.

    If one is missing from the cache, all are timed again, so that they are compared under the same
    load. Empty (with a warning) when the region cannot be copied or no step runs.
    """
    try:
        copy = copy_region(region, objectives)
    except ValueError as error:
        warnings.warn(f"placement: cannot time whole steps ({error}); deciding on the per-op estimate.",
                      stacklevel=4)
        return {}
    digest, keys = copy.digest(), []
    for candidate in timed:
        low_names = sorted(op.name for op in estimate.painted(candidate.demoted, candidate.tail_low)[1])
        keys.append(f"step|{digest}|" + hashlib.sha1("|".join(low_names).encode()).hexdigest()[:20])
    stored = [cache.get(key) for key in keys]
    if not all(stored):
        steps = [StepCandidate(frozenset(op.name for op in c.demoted), c.tail_low) for c in timed]
        longest_ms = max(estimate(c.demoted, c.tail_low) for c in timed)
        runs = int(min(MAX_STEP_RUNS, max(MIN_STEP_RUNS, STEP_TIMING_MS / (longest_ms * len(timed) or 1.0))))
        measure = options.measure_steps or (lambda candidates: time_candidate_steps(
            copy, config, candidates, options.training, warmup=1, runs=runs))
        try:
            times = measure(steps)
        except (tf.errors.OpError, ValueError, TypeError, LookupError) as error:
            warnings.warn(f"placement: timing whole steps failed ({type(error).__name__}: {error}); deciding on "
                          "the per-op estimate.", stacklevel=4)
            return {}
        stored = [[ms] if ms is not None else None for ms in times]
        if not any(stored):
            warnings.warn("placement: no candidate's whole step ran; deciding on the per-op estimate.", stacklevel=4)
        cache.add({key: value for key, value in zip(keys, stored) if value})
    return {candidate: value[0] for candidate, value in zip(timed, stored) if value}


def _fastest_step(step_ms: Mapping[PlacementCandidate, float],
                  all_float32: PlacementCandidate) -> PlacementCandidate:
    """The fastest timed candidate; all float32 unless that is beaten by ``MIN_WIN_OVER_FLOAT32``."""
    fastest = min(step_ms, key=step_ms.get)
    if all_float32 in step_ms and step_ms[fastest] * (1 + MIN_WIN_OVER_FLOAT32) > step_ms[all_float32]:
        return all_float32
    return fastest


def _reasons(chosen: PlacementCandidate, timings: Mapping[tf.Operation, OpTiming], estimate: _Estimator,
             regions: Sequence[Set[tf.Operation]], precision: tf.DType,
             step_ms: Mapping[PlacementCandidate, float]) -> Dict[str, str]:
    """Per demoted op: "slower in <type> on this device: X ms vs Y ms" (whole steps, its own times or its region's)."""
    reasons = {}
    demoted = set(chosen.demoted)
    chosen_ms = step_ms.get(chosen)
    for op in demoted:
        timing = timings[op]
        alone = f"this op alone {timing.low_ms:.3f} vs {timing.float32_ms:.3f} ms"
        with_low = [ms for candidate, ms in step_ms.items() if op not in candidate.demoted]
        if chosen_ms is not None and with_low and min(with_low) < chosen_ms:
            reasons[op.name] = (f"not worth {precision.name} on this device: {min(with_low):.3f} ms vs "
                                f"{chosen_ms:.3f} ms in float32, a win under {MIN_WIN_OVER_FLOAT32:.0%} (whole "
                                f"training steps timed side by side; {alone})")
        elif chosen_ms is not None and with_low:
            reasons[op.name] = (f"slower in {precision.name} on this device: {min(with_low):.3f} ms vs "
                                f"{chosen_ms:.3f} ms in float32 (whole training steps timed side by side; {alone})")
        elif _slower(timing, margin=0.0):
            reasons[op.name] = (f"slower in {precision.name} on this device: {timing.low_ms:.3f} ms vs "
                                f"{timing.float32_ms:.3f} ms in float32 (forward + backward of this op alone)")
        elif _slower(timing):
            charged = timing.low_ms * (1 + LOW_PRECISION_MARGIN)
            reasons[op.name] = (f"slower in {precision.name} on this device: {charged:.3f} ms vs "
                                f"{timing.float32_ms:.3f} ms in float32 (forward + backward; measured "
                                f"{timing.low_ms:.3f} ms + {LOW_PRECISION_MARGIN:.0%} for untimed costs)")
        else:
            region = next((r for r in regions if op in r), {op})
            reasons[op.name] = (f"slower in {precision.name} on this device: {estimate(demoted - region):.3f} ms vs "
                                f"{estimate(demoted):.3f} ms in float32 for its low region of {len(region)} allow "
                                f"ops, casts included ({alone})")
    return reasons


def _measured_plan(region: Region, config: PaintConfig, options: PlacementOptions,
                   objectives: Sequence[tf.Tensor]) -> PlacementPlan:
    started = time.perf_counter()
    decisions = paint(region, config)
    allow = {op for op, d in decisions.items() if d.op_class == "allow" and d.colour == LOW}
    signatures = {op: op_signature(op) for op in allow}
    signatures = {op: s for op, s in signatures.items() if s is not None}
    wanted = list(signatures.values()) + [cast_signature(n) for n in _CAST_SIZES]
    cache = TimingCache(cache_dir(options.cache_dir), detect_device().describe(), config.precision)
    by_signature, measured, cached = timings_for(wanted, cache, options, config.precision)
    timings = {op: by_signature[s] for op, s in signatures.items() if s in by_signature}
    casts = fit_cast_model(by_signature)
    estimate = _Estimator(region, config, timings, casts)
    regions = _low_regions(estimate.painted(set())[1], set(timings))
    found = _candidates([_Estimator(region, config, timings, casts, margin=0.0), estimate], timings, regions)
    estimates = {candidate: estimate(candidate.demoted) for candidate in found}
    timed = _with_tail_twins(_shortlist(estimates), estimate)
    for twin in (c for c in timed if c.tail_low):
        found[twin] = found[PlacementCandidate(twin.demoted)] + ["tail kept low"]
    step_ms = {}
    if options.time_steps and _worth_timing(timed, estimate):
        step_ms = _step_times(region, config, objectives, timed, estimate, cache, options)
    chosen = _fastest_step(step_ms, PlacementCandidate(frozenset(timings))) if step_ms else timed[0]
    reasons = _reasons(chosen, timings, estimate, regions, config.precision, step_ms)
    return PlacementPlan(
        float32_ops=dict(sorted(reasons.items())),
        low_ops=sorted(op.name for op in set(timings) - chosen.demoted),
        tail_low=chosen.tail_low,
        estimated_ms=estimate(chosen.demoted, chosen.tail_low), static_estimated_ms=estimate(set()),
        float32_estimated_ms=estimate(set(timings)),
        measured_signatures=measured, cached_signatures=cached,
        candidates=[{"found_as": ", ".join(labels), "float32_ops": len(candidate.demoted),
                     "tail_low": candidate.tail_low,
                     "estimated_ms": round(estimate(candidate.demoted, candidate.tail_low), 3),
                     "step_ms": None if candidate not in step_ms else round(step_ms[candidate], 3),
                     "chosen": candidate == chosen}
                    for candidate, labels in sorted(found.items(), key=lambda item: estimate(item[0].demoted))],
        seconds=time.perf_counter() - started,
    )


def emulated_placement(emulation: str) -> PlacementPlan:
    """The plan for a precision the device only emulates (float16 on a CPU): the static painting, nothing timed.

    Emulated kernels are always slower, so timing would keep every op float32 and hide the precision's
    numerics; the static painting runs them (slowly), so float16 can be checked on a CPU before a GPU run.
    """
    return PlacementPlan(float32_ops={}, low_ops=[], timed=False, source=(
        f"static painting, not timed: {emulation.rstrip('.')}; timing would keep every op float32, so the "
        "precision runs emulated for its numerics"))


def _read_decisions(path: str, precision: tf.DType) -> Optional[PlacementPlan]:
    stored = _read_json(path)
    if stored is None:
        return None
    if stored.get("precision") != precision.name:
        raise ValueError(f"{path} holds placement decisions for {stored.get('precision')!r}, not {precision.name!r}; "
                         "pass a new --train_dir (or delete the file) to measure again.")
    plan = PlacementPlan(float32_ops=dict(stored.get("float32_ops", {})), low_ops=list(stored.get("low_ops", [])),
                         tail_low=bool(stored.get("tail_low", False)),
                         estimated_ms=stored.get("estimated_ms"), static_estimated_ms=stored.get("static_estimated_ms"),
                         float32_estimated_ms=stored.get("float32_estimated_ms"))
    plan.source = f"reused from {path}"
    return plan


def _check_decisions_fit(plan: PlacementPlan, region: Region, path: str) -> None:
    """Raise ValueError if ``plan`` names ops ``region`` lacks: it was decided for another graph."""
    names = {op.name for op in region.ops}
    missing = sorted((set(plan.float32_ops) | set(plan.low_ops)) - names)
    if missing:
        raise ValueError(f"{path} holds placement decisions for another graph ({len(missing)} of its ops, e.g. "
                         f"{missing[0]!r}, are not in this one); pass a new --train_dir (or delete the file) to "
                         "measure again.")


def _wait_for_decisions(path: str, precision: tf.DType, wait_seconds: float) -> Optional[PlacementPlan]:
    deadline = time.monotonic() + wait_seconds
    while True:
        plan = _read_decisions(path, precision)
        if plan is not None or time.monotonic() >= deadline:
            return plan
        time.sleep(_POLL_SECONDS)


def measured_placement(region: Region, config: PaintConfig, options: Optional[PlacementOptions] = None,
                       objectives: Sequence[tf.Tensor] = ()) -> PlacementPlan:
    """Decide which allow ops of ``region`` stay float32 on this device (see the module docstring).

    Args:
      region: the ops the pass rewrites.
      config: the painting configuration (precision, classes, keep-float32 scopes, device type).
      options: cache folder, decisions file, measuring function; defaults when None.
      objectives: the float tensors training differentiates (the loss), for whole-step timing;
        none: the steps are timed forward only.

    Returns:
      The plan; its ``float32_ops`` go into ``PaintConfig.fixed_float32``.

    Raises:
      ValueError: when ``options.decisions_file`` was written for another precision or another graph.
    """
    options = options or PlacementOptions()
    path = options.decisions_file
    if path:
        started = time.perf_counter()
        wait = 0.0 if options.write_decisions else options.wait_seconds
        plan = _wait_for_decisions(path, config.precision, wait)
        if plan is not None:
            _check_decisions_fit(plan, region, path)
            plan.seconds = time.perf_counter() - started
            return plan
        if not options.write_decisions:
            warnings.warn(f"placement: {path} did not appear within {options.wait_seconds:.0f}s; measuring here, "
                          "so this worker's graph may differ from the chief's.", stacklevel=2)
    plan = _measured_plan(region, config, options, objectives)
    if path and options.write_decisions:
        content = dict(plan.as_json(), precision=config.precision.name, device=detect_device().describe(),
                       tensorflow=tf.__version__)
        write_json_atomically(path, content)
    return plan
