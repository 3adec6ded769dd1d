"""The search: which candidate placements to compare, and which one wins, each with its reasons.

Demoting one op in the middle of a low region costs two casts each way, so deciding per op alone
would create cast ping-pong. The candidates are the static placement, the per-op one (every op
slower in low demoted), everything in float32, and the best found by flipping whole connected low
regions; each with low times counted as measured and with ``low_precision_margin`` more. Those
within ``verify_window`` of the best estimate, each with its twin that keeps the tail low, are timed
as whole steps (``whole_steps``) unless their estimates differ by timing noise; the fastest step
wins, but a placement with low-precision ops must beat the all-float32 step by more than the noise
(``PlacementOptions.noise_fraction`` or the noise measured in the same rounds, whichever is larger).
Each candidate carries its reasons from the moment it is made: the estimate's when it is found,
the whole steps' when they decide.
"""

import dataclasses
from typing import Callable, Dict, FrozenSet, Hashable, List, Mapping, Optional, Sequence

from slim_mp.graph_pass.placement.candidate import Candidate
from slim_mp.graph_pass.placement.estimate import Estimator, per_op_slower
from slim_mp.graph_pass.placement.options import PlacementOptions
from slim_mp.graph_pass.placement.signatures import OpTiming


def choose_demoted(estimate: Callable[[FrozenSet[Hashable]], float], timings: Mapping[Hashable, OpTiming],
                   regions: Sequence[FrozenSet[Hashable]], margin: float) -> FrozenSet[Hashable]:
    """The set of ops to keep float32 with the lowest estimate: the best start, improved region by region."""
    per_op = frozenset(op for op, t in timings.items() if t.slower_low(margin))
    starts = (frozenset(), per_op, frozenset(timings))
    best = min(starts, key=lambda candidate: (estimate(candidate), len(candidate)))
    improved = True
    while improved:
        improved = False
        for region in regions:
            for candidate in (best | region, best - region):
                if candidate != best and estimate(candidate) < estimate(best) - 1e-9:
                    best, improved = candidate, True
    return best


def _estimated_reasons(float32_ops: FrozenSet[str], estimate: Estimator, regions: Sequence[FrozenSet[str]],
                       precision: str) -> Dict[str, str]:
    """Per demoted op, why the estimate keeps it float32: its own times, with the margin, or its region's."""
    reasons = {}
    margin = estimate.margin
    for name in float32_ops:
        timing = estimate.timings[name]
        if timing.slower_low(0.0):
            reasons[name] = (f"slower in {precision} on this device: {timing.low_ms:.3f} ms vs "
                             f"{timing.float32_ms:.3f} ms in float32 (forward + backward of this op alone)")
        elif timing.slower_low(margin):
            reasons[name] = (f"slower in {precision} on this device: {timing.low_ms * (1 + margin):.3f} ms vs "
                             f"{timing.float32_ms:.3f} ms in float32 (forward + backward; measured "
                             f"{timing.low_ms:.3f} ms + {margin:.0%} for untimed costs)")
        else:
            region = next((r for r in regions if name in r), frozenset({name}))
            without = Candidate(float32_ops - region)
            reasons[name] = (f"slower in {precision} on this device: {estimate(without):.3f} ms vs "
                             f"{estimate(Candidate(float32_ops)):.3f} ms in float32 for its low region of "
                             f"{len(region)} allow ops, casts included (this op alone {timing.low_ms:.3f} vs "
                             f"{timing.float32_ms:.3f} ms)")
    return reasons


def find_candidates(estimators: Sequence[Estimator], regions: Sequence[FrozenSet[str]],
                    precision: str) -> List[Candidate]:
    """The placements worth comparing, each with how it was found and the estimate's reasons, best estimate first.

    The last estimator is the one the candidates are ranked and explained by.
    """
    judge = estimators[-1]
    timings = judge.timings
    found: Dict[FrozenSet[str], List[str]] = {}
    found.setdefault(frozenset(), []).append("static")
    found.setdefault(frozenset(timings), []).append("all float32")
    for estimator in estimators:
        margin = f"+{estimator.margin:.0%}"
        found.setdefault(frozenset(per_op_slower(timings, estimator.margin)), []).append(f"per op ({margin})")
        best = choose_demoted(lambda names: estimator(Candidate(names)), timings, regions, estimator.margin)
        found.setdefault(best, []).append(f"estimated best ({margin})")
    candidates = [Candidate(names, False, tuple(labels), _estimated_reasons(names, judge, regions, precision),
                            judge(Candidate(names))) for names, labels in found.items()]
    return sorted(candidates, key=lambda c: (c.estimated_ms, len(c.float32_ops)))


def shortlist(candidates: Sequence[Candidate], estimate: Estimator, options: PlacementOptions) -> List[Candidate]:
    """The candidates worth timing as whole steps: those within ``verify_window`` of the best estimate,
    at most half of ``max_timed_candidates``, each followed by its twin with the tail kept low where
    that paints differently (``refine`` demotes the tail to save casts, which splits conv + bias + relu
    fusions; only timing tells which is faster)."""
    best = min(c.estimated_ms for c in candidates)
    close = [c for c in candidates if c.estimated_ms <= best * (1 + options.verify_window)]
    result = []
    for candidate in close[:options.max_timed_candidates // 2]:
        result.append(candidate)
        twin = dataclasses.replace(candidate, tail_low=True, found_as=candidate.found_as + ("tail kept low",))
        if estimate.painted(twin)[1] != estimate.painted(candidate)[1]:
            result.append(dataclasses.replace(twin, estimated_ms=estimate(twin)))
    return result[:options.max_timed_candidates]


def worth_timing(timed: Sequence[Candidate], options: PlacementOptions) -> bool:
    """Whether the candidates' estimates differ by more than the timing's noise."""
    estimates = [c.estimated_ms for c in timed]
    return len(timed) > 1 and not options.is_noise(min(estimates), max(estimates))


def decide_by_steps(timed: Sequence[Candidate], timings: Mapping[str, OpTiming], precision: str,
                    options: PlacementOptions) -> Optional[Candidate]:
    """The fastest timed candidate, its reasons now the whole steps'; all float32 unless beaten beyond the noise.

    Beyond the noise: by more than ``max(noise_fraction, the fastest step's measured noise against the
    all-float32 step)`` (``PlacementOptions.win_verdict``). None when no candidate's step was timed.
    """
    with_steps = [c for c in timed if c.step_ms is not None]
    if not with_steps:
        return None
    fastest = min(with_steps, key=lambda c: c.step_ms)
    all_float32 = next((c for c in with_steps if c.float32_ops == frozenset(timings) and not c.tail_low), None)
    chosen = fastest
    if all_float32 is not None and fastest is not all_float32:
        wins, _ = options.win_verdict(precision, fastest.step_ms, all_float32.step_ms, fastest.step_noise)
        chosen = fastest if wins else all_float32
    reasons = {}
    for name in chosen.float32_ops:
        with_low = [c for c in with_steps if name not in c.float32_ops]
        if not with_low:
            reasons[name] = chosen.reason(name)
            continue
        best_low = min(with_low, key=lambda c: c.step_ms)
        _, verdict = options.win_verdict(precision, best_low.step_ms, chosen.step_ms, best_low.step_noise)
        lost = "slower in" if best_low.step_ms >= chosen.step_ms else "not worth"
        alone = f"this op alone {timings[name].low_ms:.3f} vs {timings[name].float32_ms:.3f} ms"
        reasons[name] = (f"{lost} {precision} on this device: {verdict} (whole training steps timed side by side; "
                         f"{alone})")
    return dataclasses.replace(chosen, reasons=reasons)
