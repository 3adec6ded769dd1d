"""The measured placement, end to end: reuse a pinned decision, or time, search, decide and pin it.

Steps: the allow ops the static painting makes low get signatures; their timings come from the
cache, a fixed timings file or micro-benchmarks (``timing_cache``); the search (``search``) finds
candidates by the estimate (``estimate``) and, where they are close, times them as whole steps
(``whole_steps``, ``timed_steps``); the chosen placement, if it lowers anything, is checked as a
whole step against all float32 and the static placement (``step_check``); the winner's demoted
ops, with their reasons, become fixed-float32 ops of the painting (``apply_placement``), so deny
taint, clear/infer spreading and minimal casts still apply.
"""

import dataclasses
import time
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from slim_mp.graph_pass.paint import LOW, PaintConfig, paint
from slim_mp.graph_pass.placement.candidate import Candidate
from slim_mp.graph_pass.placement.decisions import check_decisions_fit, wait_for_decisions, write_decisions
from slim_mp.graph_pass.placement.estimate import Estimator, fit_cast_model, low_regions
from slim_mp.graph_pass.placement.options import PlacementOptions
from slim_mp.graph_pass.placement.plan import PlacementPlan
from slim_mp.graph_pass.placement.search import decide_by_steps, find_candidates, shortlist, worth_timing
from slim_mp.graph_pass.placement.signatures import OpTiming, cast_signature, op_signature
from slim_mp.graph_pass.placement.step_check import StepCheck, check_batch, judge, not_checked
from slim_mp.graph_pass.placement.timed_steps import region_copy, steps_timed
from slim_mp.graph_pass.placement.timing_cache import TimingCache, cache_dir, timings_for
from slim_mp.graph_pass.placement.whole_steps import RegionCopy
from slim_mp.graph_pass.region import Region


def _with_steps(timed: List[Candidate], copy: RegionCopy, config: PaintConfig, estimate: Estimator,
                cache: TimingCache, options: PlacementOptions, all_float32: Candidate) -> List[Candidate]:
    """``timed``, each with its whole step and that step's noise against the all-float32 one (when timed)."""
    reference = timed.index(all_float32) if all_float32 in timed else 0
    times = steps_timed(copy, config, timed, reference, estimate, cache, options, kind="step")
    if times is None:
        return timed
    return [dataclasses.replace(c, step_ms=t.ms, step_noise=t.noise) if t else c for c, t in zip(timed, times)]


def _checked(chosen: Candidate, copy: Optional[RegionCopy], why_not: str, config: PaintConfig,
             estimate: Estimator, cache: TimingCache, options: PlacementOptions,
             all_float32: Candidate) -> Tuple[Candidate, StepCheck]:
    """``chosen``, or what replaces it, after the whole-step check (``step_check``), and the check's record."""
    if copy is None:
        return chosen, not_checked(why_not)
    batch = check_batch(chosen, all_float32, Candidate(frozenset(), found_as=("static",)))
    times = steps_timed(copy, config, batch, 1, estimate, cache, options, kind="check")
    if times is None:
        return chosen, not_checked("timing the steps failed")
    return judge(batch, times, config.precision.name, options)


def _op_timings(region: Region, config: PaintConfig, cache: TimingCache,
                options: PlacementOptions) -> Tuple[Dict[str, OpTiming], Estimator, int, int]:
    """The allow ops' timings by name, the estimator over them, and how many signatures were measured / cached."""
    decisions = paint(region, config)
    allow = [op for op, d in decisions.items() if d.op_class == "allow" and d.colour == LOW]
    signatures = {op.name: op_signature(op) for op in allow}
    signatures = {name: s for name, s in signatures.items() if s is not None}
    wanted = list(signatures.values()) + [cast_signature(n) for n in options.cast_sizes]
    by_signature, measured, cached = timings_for(wanted, cache, options, config.precision)
    timings = {name: by_signature[s] for name, s in signatures.items() if s in by_signature}
    casts = fit_cast_model(by_signature, options.cast_sizes)
    return timings, Estimator(region, config, timings, casts, options.low_precision_margin), measured, cached


def _measured_plan(region: Region, config: PaintConfig, options: PlacementOptions,
                   objectives: Sequence[tf.Tensor]) -> PlacementPlan:
    started = time.perf_counter()
    cache = TimingCache(cache_dir(options.cache_dir), options.target.describe(), config.precision)
    timings, estimate, measured, cached = _op_timings(region, config, cache, options)
    regions = low_regions(region, set(estimate.painted(Candidate(frozenset()))[1]), set(timings))
    precision = config.precision.name
    unmargined = Estimator(region, config, timings, estimate.casts, 0.0)
    found = find_candidates([unmargined, estimate], regions, precision)
    timed = shortlist(found, estimate, options)
    all_float32 = next((c for c in found if c.float32_ops == frozenset(timings)), Candidate(frozenset(timings)))
    fixed = options.measure is None and options.fixed_timings_file()
    copy, why_not = (region_copy(region, objectives) if options.time_steps and not fixed and timings
                     else (None, ""))
    if copy is not None and worth_timing(timed, options):
        timed = _with_steps(timed, copy, config, estimate, cache, options, all_float32)
    chosen = decide_by_steps(timed, timings, precision, options) or timed[0]
    check = None
    if options.time_steps and not fixed and set(timings) - chosen.float32_ops:
        chosen, check = _checked(chosen, copy, why_not, config, estimate, cache, options, all_float32)
    compared = {c: c for c in found}
    compared.update({c: c for c in timed})
    return PlacementPlan(
        float32_ops=dict(sorted(chosen.reasons.items())),
        low_ops=sorted(set(timings) - chosen.float32_ops), tail_low=chosen.tail_low,
        estimated_ms=estimate(chosen), static_estimated_ms=estimate(Candidate(frozenset())),
        float32_estimated_ms=estimate(all_float32),
        measured_signatures=measured, cached_signatures=cached,
        candidates=sorted(compared.values(), key=lambda c: c.estimated_ms), check=check,
        seconds=time.perf_counter() - started, source=f"fixed timings from {fixed}" if fixed else "measured",
    )


def measured_placement(region: Region, config: PaintConfig, options: Optional[PlacementOptions] = None,
                       objectives: Sequence[tf.Tensor] = ()) -> PlacementPlan:
    """Decide which allow ops of ``region`` stay float32 on this device (see the package docstring).

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
            plan.seconds = time.perf_counter() - started
            return plan
        if not options.write_decisions:
            warnings.warn(f"placement: {path} did not appear within {options.wait_seconds:.0f}s; measuring here, "
                          "so this worker's graph may differ from the chief's.", stacklevel=2)
    plan = _measured_plan(region, config, options, objectives)
    if path and options.write_decisions:
        write_decisions(path, plan, config.precision, options.target.describe())
    return plan
