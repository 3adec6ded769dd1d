"""The measured placement, end to end. The decision, in the order the code below takes it; each step names
its function, and ``_decided`` calls steps 2-7 in this order:

1. Pinned (``_pinned``): if ``files.decisions_file`` holds a plan for this precision and graph, return it
   (a worker that may not write waits ``wait_seconds`` for the chief's file, then measures itself, with a
   warning). Else decide (2-7) and, when ``write_decisions``, pin the plan there (``decisions``).
2. Timings (``_op_timings``): the allow ops the static painting makes low, and the ops that follow them
   low (element-wise ops, batch norm, pooling), get signatures (``_timed_signatures``); their float32 and low
   milliseconds come from a fixed timings file (``options.fixed_timings()``), else the timing cache, else
   micro-benchmarks now, which are cached (``timing_cache``); two cast sizes fit the cast cost model.
   When no op has a signature (a shape not static) or none could be timed, the decision ends here
   (``_not_timed``): the static painting where the precision is native, all float32 where it is emulated.
   Where the check will likely time the all-float32 step, it is built meanwhile (``_float32_ahead``).
3. Gradient kernels (``_gradient_kernels``): each low convolution's or product's gradients take the
   kernels measured fastest with the casts they add (``kernel_choice``); its low time is then theirs in
   the estimate, which paints a placement to price it (``estimate``).
4. Candidates (``_candidates``), each with the reasons of the rule that found it: static (nothing kept
   float32), all float32, per op (every op slower low alone, at +0% and at +``low_precision_margin``),
   and the best estimate found by flipping whole connected low regions (at both margins).
5. Whole steps (``_whole_steps``): the shortlist (``search.shortlist``: those within ``verify_window``
   of the best estimate, the best beside its twin that keeps the tail low); when their estimates differ
   by more than the noise (``noise``), whole steps are timed (``options.times_whole_steps()``: not with
   fixed timings) and the region can be copied (``_step_copy``), they are timed side by side
   (``whole_steps``): the fastest wins, but one with low ops only if it beats all float32 beyond the
   noise. Otherwise the best estimate.
6. The check (``_checked``): if the chosen placement lowers anything and whole steps are timed, time it
   once more beside all float32 (``step_check``; the search's rounds answer instead when it won there by
   more than ``reuse_factor`` times the noise bound); keep it only if it beats all float32 beyond the
   noise, else static if that does (timed then beside all float32), else all float32. Built steps are
   kept for the decision (``candidate_step.StepPool``, which opens each in the background while the next
   is built); every batch of rounds stops once its verdicts are settled (``NoiseRule.settled``), the
   check's also once clear in every round (``NoiseRule.is_clear``, the bound from the micro-benchmarks'
   noise: ``SearchContext.machine_noise``).
7. The plan (``_plan``): the chosen ops kept float32 with their reasons, the low ops and their gradient
   kernels, the estimates of the chosen, static and all-float32 placements, every candidate compared,
   the check (``PlacementPlan``). The painting then applies it as fixed-float32 ops (``apply_placement``),
   so deny taint, clear/infer spreading and minimal casts still apply.

An inference graph whose batch is unknown (``served_batches``: its input ``[None, height, width, channels]``)
takes steps 2-7 at each of ``measuring.serving_batch_sizes`` on a copy of that static batch
(``decided_at_batches``); the plans are joined, an op staying low only where it paid at every batch.
"""

import dataclasses
import time
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from slim_mp.devices import detect_device
from slim_mp.graph_pass.gradient_kernels import GradientKernels
from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement.candidate import Candidate, all_float32_candidate, static_candidate
from slim_mp.graph_pass.placement.candidate_step import StepPool
from slim_mp.graph_pass.placement.context import SearchContext
from slim_mp.graph_pass.placement.decisions import check_decisions_fit, wait_for_decisions, write_decisions
from slim_mp.graph_pass.placement.estimate import (CastModel, Estimator, fit_cast_model, follower_islands,
                                                   low_regions, step_words)
from slim_mp.graph_pass.placement.kernel_choice import choose_kernels
from slim_mp.graph_pass.placement.noise import pooled_noise
from slim_mp.graph_pass.placement.options import Placement, PlacementFiles, PlacementOptions, PlacementTuning
from slim_mp.graph_pass.placement.plan import PlacementPlan
from slim_mp.graph_pass.placement.region_copy import RegionCopy, copy_for_timing, smaller_for_timing
from slim_mp.graph_pass.placement.served_batches import decided_at_batches, served_batches
from slim_mp.graph_pass.placement.search import decide_by_steps, find_candidates, shortlist, worth_timing
from slim_mp.graph_pass.placement.signatures import CAST, OpSignature, OpTiming, cast_signature, op_signature
from slim_mp.graph_pass.placement.step_check import StepCheck, whole_step_check
from slim_mp.graph_pass.placement.target import MeasuringTarget
from slim_mp.graph_pass.placement.timing_cache import TimingCache, cache_dir, timings_for
from slim_mp.graph_pass.placement.untimed import static_low, support_where_run, untimed_plan, why_unsigned
from slim_mp.graph_pass.placement.whole_steps import StepBatch, steps_timed
from slim_mp.graph_pass.region import Region


def measured_placement(region: Region, config: PaintConfig, options: Optional[PlacementOptions] = None,
                       objectives: Sequence[tf.Tensor] = ()) -> PlacementPlan:
    """Decide which timed ops of ``region`` stay float32 on this device (the steps above).

    Args:
      region: the ops the pass rewrites.
      config: the painting configuration (precision, classes, keep-float32 scopes, device type).
      options: cache folder, decisions file, measuring functions, tuning; defaults when None.
      objectives: the float tensors training differentiates (the loss), for whole-step timing;
        none: the steps are timed forward only.

    Returns:
      The plan; ``apply_placement(config, plan.chosen())`` paints with it.

    Raises:
      ValueError: when ``options.files.decisions_file`` is damaged or was written for another precision or
        another graph, or the fixed timings file is missing or damaged.
    """
    options = options or PlacementOptions()
    files = options.files
    plan = _pinned(region, config, files)
    if plan is not None:
        return plan
    batches = served_batches(region, options.measuring)
    plan = (decided_at_batches(region, config, options, objectives, batches, _decided) if batches
            else _decided(region, config, options, objectives))
    if files.decisions_file and files.write_decisions:
        write_decisions(files.decisions_file, plan, config.precision, options.measuring.target.describe())
    return plan


def _pinned(region: Region, config: PaintConfig, files: PlacementFiles) -> Optional[PlacementPlan]:
    """Step 1: the plan pinned in ``files.decisions_file`` for this graph, None when there is none to reuse."""
    path = files.decisions_file
    if not path:
        return None
    started = time.perf_counter()
    wait = 0.0 if files.write_decisions else files.wait_seconds
    plan = wait_for_decisions(path, config.precision, wait, files.poll_seconds)
    if plan is None:
        if not files.write_decisions:
            warnings.warn(f"placement: {path} did not appear within {files.wait_seconds:.0f}s; measuring here, "
                          "so this worker's graph may differ from the chief's.", stacklevel=3)
        return None
    check_decisions_fit(plan, region, path)
    return dataclasses.replace(plan, seconds=time.perf_counter() - started)


@dataclasses.dataclass(frozen=True)
class OpTimes:
    """Step 2's result: the timed ops' timings by name, the cast cost model, how many signatures were measured
    now and found cached, and the median noise of the op pairs measured now (``SearchContext.machine_noise``;
    None when none was)."""

    timings: Dict[str, OpTiming]
    casts: CastModel
    measured: int
    cached: int
    machine_noise: Optional[float]


@dataclasses.dataclass(frozen=True)
class ChosenKernels:
    """Step 3's result: the gradient kernels of the timed ops (``GradientKernels``), the sentence saying why
    for each op with one, and the estimate over the timings, each op's low time that of its kernels."""

    kernels: GradientKernels
    reasons: Dict[str, str]
    estimate: Estimator


@dataclasses.dataclass(frozen=True)
class Searched:
    """Steps 4-6's result: every candidate found, the shortlist as timed, the placement kept and its check
    (None when there was none: nothing lowered, or whole steps not timed)."""

    found: List[Candidate]
    timed: List[Candidate]
    chosen: Candidate
    check: Optional[StepCheck]


def _decided(region: Region, config: PaintConfig, options: PlacementOptions,
             objectives: Sequence[tf.Tensor]) -> PlacementPlan:
    """Steps 2-7, in order; built steps stay open (``StepPool``) until the check is done."""
    started = time.perf_counter()
    measuring = options.measuring
    signatures = _timed_signatures(region, config, measuring.time_followers)
    if not signatures:
        return _not_timed(region, config, measuring.target, why_unsigned(region, config))
    copy, why_not = _step_copy(region, options, objectives, bool(signatures))
    cache = TimingCache(cache_dir(options.files.cache_dir), measuring.target.describe(), config.precision)
    pool = StepPool(copy, config, measuring.target, measuring.step_warmup) if copy is not None else None
    try:
        ahead = _float32_ahead(pool, config, cache, signatures)
        times = _op_timings(config, signatures, cache, options, pool.wait_idle if pool is not None else None)
        if not times.timings:
            return _not_timed(region, config, measuring.target, f"none of the {len(signatures)} ops the static "
                              "lists make low could be timed here (no kernel, or not in the fixed timings)")
        chosen_kernels = _gradient_kernels(region, config, times, options.tuning)
        if ahead is not None and any(t.low_ms < t.float32_ms for t in chosen_kernels.estimate.timings.values()):
            pool.start([ahead])  # some op is faster low, so the check will likely time it: open it meanwhile
        context = SearchContext(config, options, cache, chosen_kernels.estimate, copy, why_not,
                                chosen_kernels.kernels, pool, times.machine_noise)
        found = _candidates(region, chosen_kernels.estimate)
        timed, chosen = _whole_steps(context, found)
        chosen, check = _checked(context, chosen, timed)
    finally:
        if pool is not None:
            pool.close()
    return _plan(context, Searched(found, timed, chosen, check), times, chosen_kernels.reasons, started)


# The classes of the ops that follow the allow ops low (element-wise ops, batch norm, pooling), whose low
# kernels may be slower than float32's (Eigen's bfloat16 Relu on a CPU): timed with ``time_followers``.
FOLLOWER_CLASSES = ("infer", "clear")


def _timed_signatures(region: Region, config: PaintConfig, followers: bool) -> Dict[str, OpSignature]:
    """The signatures of the allow ops the static painting makes low (and of the ops that follow them low, with
    ``followers``), by op name."""
    timed = static_low(region, config, ("allow",) + (FOLLOWER_CLASSES if followers else ()))
    signatures = {op.name: op_signature(op) for op in timed}
    return {name: s for name, s in signatures.items() if s is not None}


def _not_timed(region: Region, config: PaintConfig, target: MeasuringTarget, why: str) -> PlacementPlan:
    """The plan when nothing could be timed (``why``), on this process's device (``untimed.untimed_plan``)."""
    return untimed_plan(region, config, target, why, detect_device())


def _step_copy(region: Region, options: PlacementOptions, objectives: Sequence[tf.Tensor],
               anything_timed: bool) -> Tuple[Optional[RegionCopy], str]:
    """The region's copy whole steps are timed on (fed at most ``step_max_batch`` examples) and, when there is
    none although whole steps are timed, why; (None, "") when no whole step is timed."""
    if not (options.times_whole_steps() and anything_timed):
        return None, ""
    copy, why_not = copy_for_timing(region, objectives)
    return (smaller_for_timing(copy, options.measuring.step_max_batch) if copy is not None else None), why_not


def _check_likely(config: PaintConfig, target: MeasuringTarget) -> bool:
    """Whether the low precision is native where the step runs: then the check almost always times
    the all-float32 step, so its graph is worth building while the micro-benchmarks warm up (only
    when they run: with every op timing cached there is no warm-up to hide it behind, and the
    check's rounds are likely cached too)."""
    support = support_where_run(config, target, detect_device())
    return support is not None and support.native


def _float32_ahead(pool: Optional[StepPool], config: PaintConfig, cache: TimingCache,
                   signatures: Dict[str, OpSignature]) -> Optional[Candidate]:
    """The all-float32 step of the ops about to be timed, built in the background while the micro-benchmarks
    warm up, where the check will likely time it (``_check_likely``) and there are micro-benchmarks to hide
    behind; None when nothing is built ahead."""
    if pool is None or not _check_likely(config, pool.target) or cache.has_op_timings(signatures.values()):
        return None
    ahead = all_float32_candidate(signatures)
    pool.build_ahead([ahead])
    return ahead


def _op_timings(config: PaintConfig, signatures: Dict[str, OpSignature], cache: TimingCache,
                options: PlacementOptions, before_rounds: Optional[Callable[[], object]]) -> OpTimes:
    """Step 2: the timed ops' timings (by name), the cast model, and what was measured now."""
    measuring = options.measuring
    wanted = list(signatures.values()) + [cast_signature(n) for n in measuring.cast_sizes]
    by_signature, measured, cached = timings_for(wanted, cache, options, config.precision, before_rounds)
    noises = [by_signature[s].noise for s in measured if s in by_signature and s.op_type != CAST]
    timings = {name: by_signature[s] for name, s in signatures.items() if s in by_signature}
    casts = fit_cast_model(by_signature, measuring.cast_sizes, measuring.target)
    return OpTimes(timings, casts, len(measured), cached, pooled_noise(noises))


def _gradient_kernels(region: Region, config: PaintConfig, times: OpTimes,
                      tuning: PlacementTuning) -> ChosenKernels:
    """Step 3: each timed op's gradient kernels (``kernel_choice``), and the estimate with their low times."""
    ops = {name: region.graph.get_operation_by_name(name) for name in times.timings}
    choices = {name: choose_kernels(ops[name], timing, times.casts, tuning.noise, config.precision.name)
               for name, timing in times.timings.items()}
    timings = {name: dataclasses.replace(times.timings[name], low_ms=choice.low_ms) for name, choice in choices.items()}
    estimate = Estimator(region, config, timings, times.casts, tuning.low_precision_margin)
    kernels = GradientKernels.by_role({name: choice.kernels for name, choice in choices.items()})
    return ChosenKernels(kernels, {name: choices[name].reason for name in kernels.names()}, estimate)


def _candidates(region: Region, estimate: Estimator) -> List[Candidate]:
    """Step 4: the candidates by the estimate with the margin and without (``search.find_candidates``)."""
    static_low = set(estimate.painted(static_candidate())[1])
    timed = set(estimate.timings)
    allow = {op.name for op in region.ops if estimate.config.classes.class_of(op.type) == "allow"}
    islands = follower_islands(region, static_low - allow, timed)
    unmargined = estimate.with_margin(0.0)
    return find_candidates([unmargined, estimate], low_regions(region, static_low, timed),
                           estimate.config.precision.name, islands)


def _whole_steps(context: SearchContext, found: Sequence[Candidate]) -> Tuple[List[Candidate], Candidate]:
    """Step 5: the shortlist (and the static placement, for a cheap forward step) with its whole steps; the choice."""
    forward = not context.options.measuring.target.training
    timed = shortlist(found, context.estimate, context.options.tuning)
    timed += [c for c in found if forward and c == static_candidate() and c not in timed]
    if context.copy is not None and worth_timing(timed, context.options.tuning.noise):
        reference = timed.index(context.all_float32) if context.all_float32 in timed else 0
        times = steps_timed(context, timed, reference, StepBatch.COMPARE)
        if times is not None:
            timed = [dataclasses.replace(c, step_ms=t.ms, step_noise=t.noise) if t else c
                     for c, t in zip(timed, times)]
    return timed, decide_by_steps(context, timed) or timed[0]


def _checked(context: SearchContext, chosen: Candidate,
             timed: Sequence[Candidate]) -> Tuple[Candidate, Optional[StepCheck]]:
    """Step 6: ``chosen``, or what replaces it, after the whole-step check, and the check's record (None when
    it does not apply: nothing lowered, or whole steps not timed)."""
    if not (context.options.times_whole_steps() and context.lowered(chosen)):
        return chosen, None
    kept, check = whole_step_check(context, chosen, timed)
    copy = context.copy
    if copy is not None and copy.full_batch is not None:
        check = dataclasses.replace(check, reason=f"{check.reason} (whole steps of {copy.batch()} of the step's "
                                                  f"{copy.full_batch} examples)")
    return kept, check


def _plan(context: SearchContext, searched: Searched, times: OpTimes, kernel_reasons: Dict[str, str],
          started: float) -> PlacementPlan:
    """Step 7: the plan of ``searched.chosen`` and what it was based on (``started``: when step 2 began)."""
    chosen, estimate, options = searched.chosen, context.estimate, context.options
    compared = {c: c for c in searched.found}
    compared.update({c: c for c in searched.timed})
    low_ops = sorted(context.lowered(chosen))
    kernels = context.kernels.only(low_ops)
    fixed = options.fixed_timings()
    return PlacementPlan(
        float32_ops=dict(sorted(chosen.reasons.items())), low_ops=low_ops, tail_low=chosen.tail_low,
        gradient_kernels=kernels, gradient_reasons={name: kernel_reasons[name] for name in sorted(kernels.names())},
        timed_step=step_words(options.measuring.target.training, options.measuring.target.frozen_weights),
        estimated_ms=estimate(chosen), static_estimated_ms=estimate(static_candidate()),
        float32_estimated_ms=estimate(context.all_float32),
        measured_signatures=times.measured, cached_signatures=times.cached,
        candidates=sorted(compared.values(), key=lambda c: c.estimated_ms), check=searched.check,
        seconds=time.perf_counter() - started,
        source=f"fixed timings from {fixed}" if fixed else Placement.MEASURED.value,
    )
