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
import enum
from typing import Dict, List, Optional, Sequence, Tuple

from slim_mp.graph_pass.placement.candidate import Candidate, lowered_ops
from slim_mp.graph_pass.placement.options import PlacementOptions
from slim_mp.graph_pass.placement.stopwatch import Timed



class CheckVerdict(enum.StrEnum):
    """The check's outcome; members are their own strings, as the decisions file and reports write them."""

    ACCEPTED = "accepted"  # the chosen placement beat all float32 beyond the noise
    STATIC = "static"  # it did not; the static placement did, and is kept instead
    FLOAT32 = "float32"  # neither did: all float32 is kept
    NOT_CHECKED = "not checked"  # no whole step could be timed; the search's choice stands


@dataclasses.dataclass(frozen=True)
class StepCheck:
    """The check's outcome: ``verdict`` (a ``CheckVerdict``), why (``reason``), and the steps it compared
    with the noise of the chosen one against float32 (milliseconds; None when not timed)."""

    verdict: CheckVerdict
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
    return StepCheck(CheckVerdict.NOT_CHECKED, f"{why}; the search's choice stands unchecked")


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
    low_ops = f"{precision} placement with {len(lowered_ops(chosen, all_float32.float32_ops))} allow ops low"
    verdict = options.win_verdict(f"the chosen {low_ops}", chosen_step.ms, float32_step.ms, chosen_step.noise)
    if verdict.wins:
        return chosen, StepCheck(CheckVerdict.ACCEPTED, verdict.sentence, **record)
    if static != chosen and static_step is not None:
        static_verdict = options.win_verdict(f"the static {precision} placement", static_step.ms,
                                             float32_step.ms, static_step.noise)
        if static_verdict.wins:
            kept = dataclasses.replace(static, found_as=static.found_as + ("whole-step check",), reasons={})
            return kept, StepCheck(CheckVerdict.STATIC, f"{verdict.sentence}; {static_verdict.sentence}", **record)
    reason = f"kept float32 by the whole-step check: {verdict.sentence}"
    reasons = {name: chosen.reasons.get(name, reason) for name in all_float32.float32_ops}
    kept = dataclasses.replace(all_float32, found_as=all_float32.found_as + ("whole-step check",), reasons=reasons)
    return kept, StepCheck(CheckVerdict.FLOAT32, verdict.sentence, **record)
