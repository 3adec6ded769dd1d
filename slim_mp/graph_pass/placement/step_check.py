"""The last word before a placement is accepted: its whole step against all float32 and the static placement.

The search picks its placement from estimates and, where they are close, from whole steps; on a
busy machine either can mislead, and the winner of several noisy timings is the one whose noise
flattered it most. So a chosen placement that lowers anything is timed once more, fresh, as a whole
step in the same interleaved rounds as the all-float32 step and the static one. It is accepted only
if it beats float32 by more than the noise (``PlacementOptions.win_verdict``); otherwise the static
placement, if that beats float32 by more than the noise; otherwise all float32. A placement kept
low is then never one measured no faster than float32.
"""

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

from slim_mp.graph_pass.placement.candidate import Candidate
from slim_mp.graph_pass.placement.options import PlacementOptions
from slim_mp.graph_pass.placement.stopwatch import Timed

ACCEPTED = "accepted"
NOT_CHECKED = "not checked"


@dataclasses.dataclass(frozen=True)
class StepCheck:
    """The check's outcome: ``verdict`` (``accepted``, ``static`` or ``float32``: the placement kept
    instead, or ``not checked``), why (``reason``), and the steps it compared with the noise of the
    chosen one against float32 (milliseconds; None when not timed)."""

    verdict: str
    reason: str
    chosen_ms: Optional[float] = None
    float32_ms: Optional[float] = None
    static_ms: Optional[float] = None
    noise: Optional[float] = None

    def as_json(self) -> dict:
        """The check as plain JSON values."""
        return dataclasses.asdict(self)

    def summary(self) -> str:
        """One line for the rewrite report."""
        return f"whole-step check: {self.verdict} ({self.reason})"


def check_batch(chosen: Candidate, all_float32: Candidate, static: Candidate) -> List[Candidate]:
    """The placements the check times together: the chosen one, all float32 (the reference) and static."""
    return list(dict.fromkeys([chosen, all_float32, static]))


def not_checked(why: str) -> StepCheck:
    """The record of a check that could not run, saying why."""
    return StepCheck(NOT_CHECKED, f"{why}; the search's choice stands unchecked")


def judge(batch: Sequence[Candidate], times: Sequence[Optional[Timed]], precision: str,
          options: PlacementOptions) -> Tuple[Candidate, StepCheck]:
    """The placement kept after timing ``batch`` (``check_batch``'s order) and the check's record.

    ``times``: per candidate of ``batch``, its step and its noise against the all-float32 step.
    """
    chosen, all_float32 = batch[0], batch[1]
    static = batch[2] if len(batch) > 2 else batch[0]
    by_candidate: Dict[Candidate, Optional[Timed]] = dict(zip(batch, times))
    chosen_step, float32_step, static_step = (by_candidate.get(c) for c in (chosen, all_float32, static))
    if chosen_step is None or float32_step is None:
        return chosen, not_checked("the chosen or the all-float32 step did not run")
    record = dict(chosen_ms=chosen_step.ms, float32_ms=float32_step.ms,
                  static_ms=static_step.ms if static_step else None, noise=chosen_step.noise)
    low_ops = f"{precision} placement with {len(set(all_float32.float32_ops) - chosen.float32_ops)} allow ops low"
    wins, verdict = options.win_verdict(f"the chosen {low_ops}", chosen_step.ms, float32_step.ms,
                                        chosen_step.noise)
    if wins:
        return chosen, StepCheck(ACCEPTED, verdict, **record)
    if static != chosen and static_step is not None:
        static_wins, static_verdict = options.win_verdict(f"the static {precision} placement", static_step.ms,
                                                          float32_step.ms, static_step.noise)
        if static_wins:
            kept = dataclasses.replace(static, found_as=static.found_as + ("whole-step check",), reasons={})
            return kept, StepCheck("static", f"{verdict}; {static_verdict}", **record)
    reason = f"kept float32 by the whole-step check: {verdict}"
    reasons = {name: chosen.reasons.get(name, reason) for name in all_float32.float32_ops}
    kept = dataclasses.replace(all_float32, found_as=all_float32.found_as + ("whole-step check",), reasons=reasons)
    return kept, StepCheck("float32", verdict, **record)
