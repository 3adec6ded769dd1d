"""The measured placement, end to end: reuse a pinned decision, or time, search, decide and pin it.

Steps: the allow ops the static painting makes low get signatures; their timings come from the
cache, a fixed timings file or micro-benchmarks (``timing_cache``); the search (``search``) finds
candidates by the estimate (``estimate``) and, where they are close, times them as whole steps
(``whole_steps``); the winner's demoted ops, with their reasons, become fixed-float32 ops of the
painting (``apply_placement``), so deny taint, clear/infer spreading and minimal casts still apply.
"""

import dataclasses
import hashlib
import time
import warnings
from typing import List, Optional, Sequence

import tensorflow as tf

from slim_mp.graph_pass.paint import LOW, PaintConfig, paint
from slim_mp.graph_pass.placement.candidate import Candidate
from slim_mp.graph_pass.placement.decisions import check_decisions_fit, wait_for_decisions, write_decisions
from slim_mp.graph_pass.placement.estimate import Estimator, fit_cast_model, low_regions
from slim_mp.graph_pass.placement.options import PlacementOptions
from slim_mp.graph_pass.placement.plan import PlacementPlan
from slim_mp.graph_pass.placement.search import decide_by_steps, find_candidates, shortlist, worth_timing
from slim_mp.graph_pass.placement.signatures import cast_signature, op_signature
from slim_mp.graph_pass.placement.timing_cache import TimingCache, cache_dir, timings_for
from slim_mp.graph_pass.placement.whole_steps import copy_region, time_candidate_steps
from slim_mp.graph_pass.region import Region

_STEP_ERRORS = (tf.errors.OpError, ValueError, TypeError, LookupError)


def _timed_steps(region: Region, config: PaintConfig, objectives: Sequence[tf.Tensor], timed: List[Candidate],
                 estimate: Estimator, cache: TimingCache, options: PlacementOptions) -> List[Candidate]:
    """``timed``, each with its whole step's milliseconds, from the cache or timed side by side now.

    If one is missing from the cache, all are timed again, so that they are compared under the same
    load. Unchanged (with a warning) when the region cannot be copied or no step runs.
    """
    try:
        copy = copy_region(region, objectives)
    except ValueError as error:
        warnings.warn(f"placement: cannot time whole steps ({error}); deciding on the per-op estimate.",
                      stacklevel=4)
        return timed
    digest = copy.digest()
    keys = [f"step|{digest}|" + hashlib.sha1("|".join(sorted(estimate.painted(c)[1])).encode()).hexdigest()[:20]
            for c in timed]
    stored = [cache.get(key) for key in keys]
    if not all(stored):
        longest_ms = max(c.estimated_ms for c in timed)
        runs = int(min(options.max_step_runs, max(options.min_step_runs,
                                                  options.step_timing_ms / (longest_ms * len(timed) or 1.0))))
        measure = options.measure_steps or (lambda candidates: time_candidate_steps(
            copy, config, candidates, options.target, warmup=1, runs=runs))
        try:
            times = measure(timed)
        except _STEP_ERRORS as error:
            warnings.warn(f"placement: timing whole steps failed ({type(error).__name__}: {error}); deciding on "
                          "the per-op estimate.", stacklevel=4)
            return timed
        stored = [[ms] if ms is not None else None for ms in times]
        if not any(stored):
            warnings.warn("placement: no candidate's whole step ran; deciding on the per-op estimate.", stacklevel=4)
        cache.add({key: value for key, value in zip(keys, stored) if value})
    return [dataclasses.replace(c, step_ms=value[0] if value else None) for c, value in zip(timed, stored)]


def _measured_plan(region: Region, config: PaintConfig, options: PlacementOptions,
                   objectives: Sequence[tf.Tensor]) -> PlacementPlan:
    started = time.perf_counter()
    decisions = paint(region, config)
    allow = [op for op, d in decisions.items() if d.op_class == "allow" and d.colour == LOW]
    signatures = {op.name: op_signature(op) for op in allow}
    signatures = {name: s for name, s in signatures.items() if s is not None}
    wanted = list(signatures.values()) + [cast_signature(n) for n in options.cast_sizes]
    cache = TimingCache(cache_dir(options.cache_dir), options.target.describe(), config.precision)
    by_signature, measured, cached = timings_for(wanted, cache, options, config.precision)
    timings = {name: by_signature[s] for name, s in signatures.items() if s in by_signature}
    casts = fit_cast_model(by_signature, options.cast_sizes)
    estimate = Estimator(region, config, timings, casts, options.low_precision_margin)
    regions = low_regions(region, set(estimate.painted(Candidate(frozenset()))[1]), set(timings))
    precision = config.precision.name
    found = find_candidates([Estimator(region, config, timings, casts, 0.0), estimate], regions, precision)
    timed = shortlist(found, estimate, options)
    fixed = options.measure is None and options.fixed_timings_file()
    if options.time_steps and not fixed and worth_timing(timed, options):
        timed = _timed_steps(region, config, objectives, timed, estimate, cache, options)
    chosen = decide_by_steps(timed, timings, precision, options) or timed[0]
    compared = {c: c for c in found}
    compared.update({c: c for c in timed})
    return PlacementPlan(
        float32_ops=dict(sorted(chosen.reasons.items())),
        low_ops=sorted(set(timings) - chosen.float32_ops), tail_low=chosen.tail_low,
        estimated_ms=estimate(chosen), static_estimated_ms=estimate(Candidate(frozenset())),
        float32_estimated_ms=estimate(Candidate(frozenset(timings))),
        measured_signatures=measured, cached_signatures=cached,
        candidates=sorted(compared.values(), key=lambda c: c.estimated_ms),
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
