"""The search: which candidate placements to compare, and which one wins, each with its reasons.

Demoting one op in the middle of a low region costs two casts each way, so deciding per op alone
would create cast ping-pong. The candidates are the static placement, the per-op one (every op
slower in low demoted), everything in float32, and the best found by flipping whole connected low
regions; each with low times counted as measured and with ``low_precision_margin`` more. Those
within ``verify_window`` of the best estimate, each with its twin that keeps the tail low, are timed
as whole steps (``whole_steps``) unless their estimates differ by timing noise; the fastest step
wins, but a placement with low-precision ops must beat the all-float32 step by more than the noise
(``NoiseRule.floor`` or the noise measured in the same rounds, whichever is larger).
Each candidate carries its reasons from the moment it is made: the rule's that found it (per op or
region flips, at that rule's margin), the whole steps' when they decide.
"""

import dataclasses
from typing import Callable, Dict, FrozenSet, Hashable, List, Mapping, Optional, Sequence, Tuple

from slim_mp.graph_pass.placement.candidate import Candidate, all_float32_candidate, static_candidate
from slim_mp.graph_pass.placement.context import SearchContext
from slim_mp.graph_pass.placement.estimate import Estimator, step_words
from slim_mp.graph_pass.placement.noise import NoiseRule
from slim_mp.graph_pass.placement.options import PlacementTuning
from slim_mp.graph_pass.placement.signatures import OpTiming


def per_op_slower(timings: Mapping[Hashable, OpTiming], margin: float) -> FrozenSet[Hashable]:
    """The per-op rule: the ops slower in low precision alone, charged ``margin`` more (``OpTiming.slower_low``)."""
    return frozenset(op for op, t in timings.items() if t.slower_low(margin))


def choose_demoted(estimate: Callable[[FrozenSet[Hashable]], float], timings: Mapping[Hashable, OpTiming],
                   regions: Sequence[FrozenSet[Hashable]], margin: float,
                   islands: Sequence[FrozenSet[Hashable]] = ()) -> FrozenSet[Hashable]:
    """The set of ops to keep float32 with the lowest estimate: the best start improved region by region and
    island by island, and, beside it, nothing kept float32 but the islands that pay float32 (a region flipped
    whole first would hide them); the better of the two."""
    starts = (frozenset(), per_op_slower(timings, margin), frozenset(timings))
    best_start = min(starts, key=lambda candidate: (estimate(candidate), len(candidate)))
    results = [_improved(estimate, best_start, list(regions) + list(islands)),
               _improved(estimate, frozenset(), islands)]
    return min(results, key=lambda candidate: (estimate(candidate), len(candidate)))


def _improved(estimate: Callable[[FrozenSet[Hashable]], float], start: FrozenSet[Hashable],
              regions: Sequence[FrozenSet[Hashable]]) -> FrozenSet[Hashable]:
    """``start``, each region flipped (kept float32, or let go low) while that lowers the estimate."""
    best = start
    improved = True
    while improved:
        improved = False
        for region in regions:
            for candidate in (best | region, best - region):
                if candidate != best and estimate(candidate) < estimate(best) - 1e-9:
                    best, improved = candidate, True
    return best


def per_op_reason(timing: OpTiming, margin: float, precision: str, training: bool = True) -> str:
    """Why the per-op rule at ``margin`` keeps an op float32: its own times (and the margin, when that decided),
    of the step timed (``step_words``)."""
    timed = step_words(training)
    if timing.slower_low(0.0):
        return (f"slower in {precision} on this device: {timing.low_ms:.3f} ms vs "
                f"{timing.float32_ms:.3f} ms in float32 ({timed} of this op alone)")
    return (f"slower in {precision} on this device: {timing.charged_low_ms(margin):.3f} ms vs "
            f"{timing.float32_ms:.3f} ms in float32 ({timed}; measured "
            f"{timing.low_ms:.3f} ms + {margin:.0%} for untimed costs)")


def _region_reason(name: str, float32_ops: FrozenSet[str], estimate: Estimator, regions: Sequence[FrozenSet[str]],
                   precision: str) -> str:
    """Why flipping regions by ``estimate`` keeps ``name`` float32: its low region's estimate, casts included."""
    region = next((r for r in regions if name in r), frozenset({name}))
    timing = estimate.timings[name]
    return (f"slower in {precision} on this device: {estimate(Candidate(float32_ops - region)):.3f} ms vs "
            f"{estimate(Candidate(float32_ops)):.3f} ms in float32 for its low region of "
            f"{len(region)} timed ops, casts included (this op alone {timing.low_ms:.3f} vs "
            f"{timing.float32_ms:.3f} ms)")


def _per_op(estimate: Estimator, precision: str) -> Candidate:
    """The per-op candidate at ``estimate``'s margin, each op with the per-op rule's reason."""
    names = per_op_slower(estimate.allow_timings(), estimate.margin)
    return Candidate(names, found_as=(f"per op (+{estimate.margin:.0%})",), reasons={
        name: per_op_reason(estimate.timings[name], estimate.margin, precision, estimate.training) for name in names})


def _best_of(names: FrozenSet[str], label: str, estimate: Estimator, regions: Sequence[FrozenSet[str]],
             precision: str) -> Candidate:
    """The candidate ``names`` as ``choose_demoted`` reached it by ``estimate``: an op it started from as
    slower alone keeps the per-op reason at that margin, one a region flip demoted its region's."""
    alone = per_op_slower(estimate.allow_timings(), estimate.margin)
    return Candidate(names, found_as=(label,), reasons={
        name: per_op_reason(estimate.timings[name], estimate.margin, precision, estimate.training) if name in alone
        else _region_reason(name, names, estimate, regions, precision) for name in names})


def find_candidates(estimators: Sequence[Estimator], regions: Sequence[FrozenSet[str]], precision: str,
                    islands: Sequence[FrozenSet[str]] = ()) -> List[Candidate]:
    """The placements worth comparing, each with how it was found and why, best estimate first.

    Per estimator (each charging its own margin): the per-op candidate and the estimated best. Each
    candidate's reasons are those of the rule and margin that found it; one found by several keeps the
    first rule's (per op before estimated best, the smaller margin first; the all-float32 reference
    last). The last estimator is the one the candidates are ranked by. ``regions``: the connected low
    regions; ``islands``: the groups of ops that follow the allow ops inside them (``follower_islands``).
    """
    judge = estimators[-1]
    units = list(islands) + list(regions)  # an op's reason names its smallest unit
    all_float32 = all_float32_candidate(judge.timings).float32_ops
    found = [static_candidate(), _best_of(all_float32, "all float32", judge, units, precision)]
    for estimate in estimators:
        found.append(_per_op(estimate, precision))
        best = choose_demoted(lambda names: estimate(Candidate(names)), estimate.allow_timings(), regions,
                              estimate.margin, islands)
        found.append(_best_of(best, f"estimated best (+{estimate.margin:.0%})", estimate, units, precision))
    labels: Dict[FrozenSet[str], Tuple[str, ...]] = {}
    for candidate in found:
        labels[candidate.float32_ops] = labels.get(candidate.float32_ops, ()) + candidate.found_as
    reasons: Dict[FrozenSet[str], Mapping[str, str]] = {}
    for candidate in found[2:] + found[:2]:
        reasons.setdefault(candidate.float32_ops, candidate.reasons)
    candidates = [Candidate(names, False, found_as, reasons[names], judge(Candidate(names)))
                  for names, found_as in labels.items()]
    return sorted(candidates, key=lambda c: (c.estimated_ms, len(c.float32_ops)))


def shortlist(candidates: Sequence[Candidate], estimate: Estimator, tuning: PlacementTuning) -> List[Candidate]:
    """The candidates worth timing as whole steps: those within ``verify_window`` of the best estimate, at most
    ``max_timed_candidates``, the best one followed by its twin with the tail kept low where that paints
    differently (``refine`` demotes the tail to save casts, which splits conv + bias + relu fusions; only
    timing tells which is faster). One twin, the best's: every step timed costs the cold pass its build, its
    opening and seven rounds or more."""
    best = min(c.estimated_ms for c in candidates)
    close = [c for c in candidates if c.estimated_ms <= best * (1 + tuning.verify_window)]
    result = close[:1]
    twin = dataclasses.replace(close[0], tail_low=True, found_as=close[0].found_as + ("tail kept low",))
    if estimate.painted(twin)[1] != estimate.painted(close[0])[1]:
        result.append(dataclasses.replace(twin, estimated_ms=estimate(twin)))
    return (result + close[1:])[:tuning.max_timed_candidates]


def worth_timing(timed: Sequence[Candidate], noise: NoiseRule) -> bool:
    """Whether the candidates' estimates differ by more than the timing's noise."""
    estimates = [c.estimated_ms for c in timed]
    return len(timed) > 1 and not noise.is_noise(min(estimates), max(estimates))


def decide_by_steps(context: SearchContext, timed: Sequence[Candidate]) -> Optional[Candidate]:
    """The fastest timed candidate, its reasons now the whole steps'; all float32 unless beaten beyond the noise.

    Beyond the noise: by more than ``max(noise.floor, the fastest step's measured noise against the
    all-float32 step)`` (``NoiseRule.win_verdict``). None when no candidate's step was timed.
    """
    with_steps = [c for c in timed if c.step_ms is not None]
    if not with_steps:
        return None
    noise, precision, timings = context.options.tuning.noise, context.precision, context.estimate.timings
    fastest = min(with_steps, key=lambda c: c.step_ms)
    all_float32 = next((c for c in with_steps if c == context.all_float32), None)
    chosen = fastest
    if all_float32 is not None and fastest is not all_float32:
        wins = noise.win_verdict(precision, fastest.step_ms, all_float32.step_ms, fastest.step_noise).wins
        chosen = fastest if wins else all_float32
    reasons = {}
    for name in chosen.float32_ops:
        with_low = [c for c in with_steps if name not in c.float32_ops]
        if not with_low:
            reasons[name] = chosen.reason(name)
            continue
        best_low = min(with_low, key=lambda c: c.step_ms)
        verdict = noise.win_verdict(precision, best_low.step_ms, chosen.step_ms, best_low.step_noise).sentence
        lost = "slower in" if best_low.step_ms >= chosen.step_ms else "not worth"
        alone = f"this op alone {timings[name].low_ms:.3f} vs {timings[name].float32_ms:.3f} ms"
        reasons[name] = (f"{lost} {precision} on this device: {verdict} (whole training steps timed side by side; "
                         f"{alone})")
    return dataclasses.replace(chosen, reasons=reasons)
