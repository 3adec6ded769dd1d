"""The measured placement, end to end. The decision, in the order the code below takes it:

1. Pinned: if ``options.decisions_file`` holds a plan for this precision and graph, return it (a
   worker that may not write waits ``wait_seconds`` for the chief's file, then measures itself, with a
   warning). Else decide (2-6) and, when ``write_decisions``, pin the plan there (``decisions``).
2. Timings: the allow ops the static painting makes low, and the ops that follow them low (element-wise
   ops, batch norm, pooling), get signatures (``signatures``); their
   float32 and low milliseconds come from a fixed timings file (``options.fixed_timings()``), else
   the timing cache, else micro-benchmarks now, which are cached (``timing_cache``); two cast sizes
   fit the cast cost model. Estimate a placement by painting with it (``estimate``).
3. Candidates (``search.find_candidates``), each with the reasons of the rule that found it:
   static (nothing kept float32), all float32, per op (every op slower low alone, at +0% and at
   +``low_precision_margin``), and the best estimate found by flipping whole connected low regions
   (at both margins). The shortlist: those within ``verify_window`` of the best estimate, each
   beside its twin that keeps the tail low.
4. Whole steps, when the shortlist's estimates differ by more than the noise (``noise``) and whole
   steps are timed (``options.times_whole_steps()``: not with fixed timings) and the region can be
   copied (``region_copy``): time the shortlist side by side (``whole_steps``); the fastest wins,
   but one with low ops only if it beats all float32 beyond the noise. Otherwise the best estimate.
5. The check: if the chosen placement lowers anything and whole steps are timed, time it once more
   beside all float32 (``step_check``; the search's rounds answer instead when it won there by more
   than ``reuse_factor`` times the noise bound); keep it only if it beats all float32 beyond the
   noise, else static if that does (timed then beside all float32), else all float32. Built steps
   are kept for the decision (``candidate_step.StepPool``, which opens each in the background while
   the next is built); every batch of rounds stops once its verdicts are settled
   (``NoiseRule.settled``), the check's also once clear in every round (``NoiseRule.is_clear``,
   the bound from the micro-benchmarks' noise: ``SearchContext.machine_noise``).
6. The plan (``PlacementPlan``): the chosen ops kept float32 with their reasons, the low ops, the
   estimates of the chosen, static and all-float32 placements, every candidate compared, the check.
   The painting then applies it as fixed-float32 ops (``apply_placement``), so deny taint,
   clear/infer spreading and minimal casts still apply.
"""

import dataclasses
import time
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from slim_mp.devices import detect_device, precision_support
from slim_mp.graph_pass.paint import LOW, PaintConfig, paint
from slim_mp.graph_pass.placement.candidate import Candidate, all_float32_candidate, static_candidate
from slim_mp.graph_pass.placement.candidate_step import StepPool
from slim_mp.graph_pass.placement.context import SearchContext
from slim_mp.graph_pass.placement.decisions import check_decisions_fit, wait_for_decisions, write_decisions
from slim_mp.graph_pass.gradient_kernels import GradientKernels
from slim_mp.graph_pass.placement.estimate import Estimator, fit_cast_model, follower_islands, low_regions, step_words
from slim_mp.graph_pass.placement.kernel_choice import KernelChoice, choose_kernels
from slim_mp.graph_pass.placement.noise import pooled_noise
from slim_mp.graph_pass.placement.options import Placement, PlacementOptions
from slim_mp.graph_pass.placement.plan import PlacementPlan
from slim_mp.graph_pass.placement.region_copy import copy_for_timing, smaller_for_timing
from slim_mp.graph_pass.placement.search import decide_by_steps, find_candidates, shortlist, worth_timing
from slim_mp.graph_pass.placement.signatures import CAST, OpSignature, OpTiming, cast_signature, op_signature
from slim_mp.graph_pass.placement.step_check import StepCheck, check_batch, judge, not_checked, reused_check
from slim_mp.graph_pass.placement.timing_cache import TimingCache, cache_dir, timings_for
from slim_mp.graph_pass.placement.whole_steps import StepBatch, steps_timed
from slim_mp.graph_pass.region import Region


def measured_placement(region: Region, config: PaintConfig, options: Optional[PlacementOptions] = None,
                       objectives: Sequence[tf.Tensor] = ()) -> PlacementPlan:
    """Decide which timed ops of ``region`` stay float32 on this device (step 1 above; 2-6 in ``_decided``).

    Args:
      region: the ops the pass rewrites.
      config: the painting configuration (precision, classes, keep-float32 scopes, device type).
      options: cache folder, decisions file, measuring functions, tuning; defaults when None.
      objectives: the float tensors training differentiates (the loss), for whole-step timing;
        none: the steps are timed forward only.

    Returns:
      The plan; ``apply_placement(config, plan.chosen())`` paints with it.

    Raises:
      ValueError: when ``options.decisions_file`` is damaged or was written for another precision or
        another graph, or the fixed timings file is missing or damaged.
    """
    options = options or PlacementOptions()
    path = options.decisions_file
    if path:
        started = time.perf_counter()
        wait = 0.0 if options.write_decisions else options.wait_seconds
        plan = wait_for_decisions(path, config.precision, wait, options.poll_seconds)
        if plan is not None:
            check_decisions_fit(plan, region, path)
            return dataclasses.replace(plan, seconds=time.perf_counter() - started)
        if not options.write_decisions:
            warnings.warn(f"placement: {path} did not appear within {options.wait_seconds:.0f}s; measuring here, "
                          "so this worker's graph may differ from the chief's.", stacklevel=2)
    plan = _decided(region, config, options, objectives)
    if path and options.write_decisions:
        write_decisions(path, plan, config.precision, options.target.describe())
    return plan


# The classes of the ops that follow the allow ops low (element-wise ops, batch norm, pooling), whose low
# kernels may be slower than float32's (Eigen's bfloat16 Relu on a CPU): timed with ``time_followers``.
FOLLOWER_CLASSES = ("infer", "clear")


def _timed_signatures(region: Region, config: PaintConfig, followers: bool) -> Dict[str, OpSignature]:
    """The signatures of the allow ops the static painting makes low (and of the ops that follow them low, with
    ``followers``), by op name."""
    decisions = paint(region, config)
    classes = ("allow",) + (FOLLOWER_CLASSES if followers else ())
    timed = [op for op, d in decisions.items() if d.op_class in classes and d.colour == LOW]
    signatures = {op.name: op_signature(op) for op in timed}
    return {name: s for name, s in signatures.items() if s is not None}


def _check_likely(config: PaintConfig, options: PlacementOptions) -> bool:
    """Whether the low precision is native where the step runs: then the check almost always times
    the all-float32 step, so its graph is worth building while the micro-benchmarks warm up (only
    when they run: with every op timing cached there is no warm-up to hide it behind, and the
    check's rounds are likely cached too)."""
    device = detect_device()
    kind = options.target.device_type() or device.kind
    return kind == device.kind and precision_support(device)[config.precision.name].native


def _op_timings(region: Region, config: PaintConfig, signatures: Dict[str, OpSignature], cache: TimingCache,
                options: PlacementOptions, before_rounds: Optional[Callable[[], object]]
                ) -> Tuple[Estimator, Dict[str, KernelChoice], int, int, Optional[float]]:
    """Step 2: the estimator over the timed ops' timings (by name; each op's low time with its best gradient
    kernels, ``kernel_choice``), those kernel choices, how many signatures were measured / cached, and the
    median noise of the op pairs measured now (``SearchContext.machine_noise``)."""
    wanted = list(signatures.values()) + [cast_signature(n) for n in options.cast_sizes]
    by_signature, measured, cached = timings_for(wanted, cache, options, config.precision, before_rounds)
    noises = [by_signature[s].noise for s in measured if s in by_signature and s.op_type != CAST]
    casts = fit_cast_model(by_signature, options.cast_sizes, options.target.training)
    choices = {name: choose_kernels(region.graph.get_operation_by_name(name), by_signature[s], casts, options.noise,
                                    config.precision.name)
               for name, s in signatures.items() if s in by_signature}
    timings: Dict[str, OpTiming] = {name: dataclasses.replace(by_signature[signatures[name]], low_ms=choice.low_ms)
                                    for name, choice in choices.items()}
    estimate = Estimator(region, config, timings, casts, options.low_precision_margin)
    return estimate, choices, len(measured), cached, pooled_noise(noises)


def _candidates(region: Region, estimate: Estimator) -> List[Candidate]:
    """Step 3: the candidates by the estimate with the margin and without (``search.find_candidates``)."""
    static_low = set(estimate.painted(static_candidate())[1])
    timed = set(estimate.timings)
    allow = {op.name for op in region.ops if estimate.config.classes.class_of(op.type) == "allow"}
    islands = follower_islands(region, static_low - allow, timed)
    unmargined = estimate.with_margin(0.0)
    return find_candidates([unmargined, estimate], low_regions(region, static_low, timed),
                           estimate.config.precision.name, islands)


def _with_steps(context: SearchContext, timed: List[Candidate]) -> List[Candidate]:
    """Step 4: ``timed``, each with its whole step and that step's noise against the all-float32 one (when timed)."""
    reference = timed.index(context.all_float32) if context.all_float32 in timed else 0
    times = steps_timed(context, timed, reference, StepBatch.COMPARE)
    if times is None:
        return timed
    return [dataclasses.replace(c, step_ms=t.ms, step_noise=t.noise) if t else c for c, t in zip(timed, times)]


def _checked(context: SearchContext, chosen: Candidate, timed: Sequence[Candidate]) -> Tuple[Candidate, StepCheck]:
    """Step 5: ``chosen``, or what replaces it, after the whole-step check, and the check's record."""
    if context.copy is None:
        return chosen, not_checked(context.why_not_copied)
    reused = reused_check(timed, chosen, context.all_float32, context.precision, context.options)
    if reused is not None:
        return reused
    static = static_candidate()
    if context.steps is not None:
        context.steps.keep_only([chosen, context.all_float32, static])
    batch = check_batch(chosen, context.all_float32)
    times = steps_timed(context, batch, len(batch) - 1, StepBatch.CHECK)
    if times is None:
        return chosen, not_checked("timing the steps failed")
    return judge(batch, times, context.precision, context.options,
                 lambda: steps_timed(context, [static, context.all_float32], 1, StepBatch.STATIC))


def _decided(region: Region, config: PaintConfig, options: PlacementOptions,
             objectives: Sequence[tf.Tensor]) -> PlacementPlan:
    """Steps 2-6: time, search, check, and the plan."""
    started = time.perf_counter()
    cache = TimingCache(cache_dir(options.cache_dir), options.target.describe(), config.precision)
    signatures = _timed_signatures(region, config, options.time_followers)
    copy, why_not = (copy_for_timing(region, objectives) if options.times_whole_steps() and signatures
                     else (None, ""))
    copy = smaller_for_timing(copy, options.step_max_batch) if copy is not None else None
    pool = StepPool(copy, config, options.target, options.step_warmup) if copy is not None else None
    try:
        ahead = (pool is not None and _check_likely(config, options)
                 and not cache.has_op_timings(signatures.values()))
        if ahead:
            pool.build_ahead([all_float32_candidate(signatures)])
        estimate, choices, measured, cached, machine_noise = _op_timings(
            region, config, signatures, cache, options, pool.wait_idle if pool is not None else None)
        kernels = GradientKernels.chosen({region.graph.get_operation_by_name(name): choice.kernels
                                          for name, choice in choices.items()})
        if ahead and any(t.low_ms < t.float32_ms for t in estimate.timings.values()):
            # Some op is faster low, so the check will likely time it: open it while the search runs.
            pool.start([all_float32_candidate(signatures)])
        found = _candidates(region, estimate)
        timed = shortlist(found, estimate, options)
        context = SearchContext(config, options, cache, estimate, copy, why_not, kernels, steps=pool,
                                machine_noise=machine_noise)
        if copy is not None and worth_timing(timed, options):
            timed = _with_steps(context, timed)
        chosen = decide_by_steps(context, timed) or timed[0]
        check = None
        if options.times_whole_steps() and context.lowered(chosen):
            chosen, check = _checked(context, chosen, timed)
            if copy is not None and copy.full_batch is not None:
                batch = copy.batch()
                check = dataclasses.replace(check, reason=f"{check.reason} (whole steps of {batch} of the step's "
                                                          f"{copy.full_batch} examples)")
    finally:
        if pool is not None:
            pool.close()
    compared = {c: c for c in found}
    compared.update({c: c for c in timed})
    fixed = options.fixed_timings()
    low_ops = sorted(context.lowered(chosen))
    return PlacementPlan(
        float32_ops=dict(sorted(chosen.reasons.items())),
        low_ops=low_ops, tail_low=chosen.tail_low,
        gradient_kernels=kernels.only(low_ops),
        gradient_reasons={name: choices[name].reason for name in low_ops if name in kernels.names()},
        timed_step=step_words(options.target.training),
        estimated_ms=estimate(chosen), static_estimated_ms=estimate(static_candidate()),
        float32_estimated_ms=estimate(context.all_float32),
        measured_signatures=measured, cached_signatures=cached,
        candidates=sorted(compared.values(), key=lambda c: c.estimated_ms), check=check,
        seconds=time.perf_counter() - started,
        source=f"fixed timings from {fixed}" if fixed else Placement.MEASURED.value,
    )
