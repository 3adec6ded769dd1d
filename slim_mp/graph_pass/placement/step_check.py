"""The last word before a placement is accepted: its whole step against all float32 (and static).

The search picks its placement from estimates and, where they are close, from whole steps; on a
busy machine either can mislead, and the winner of several noisy timings is the one whose noise
flattered it most. So a chosen placement that lowers anything is timed once more, fresh, as a whole
step in the same interleaved rounds as the all-float32 step. It is accepted only if it beats float32
by more than the noise (``NoiseRule.win_verdict``); otherwise the static placement, timed
then beside all float32 in rounds of their own, if that beats float32 by more than the noise;
otherwise all float32. A placement kept low is then never one measured no faster than float32.

One exception spares the fresh timing (``reused_check``): when the search timed the chosen step
beside all float32 and it won by more than ``reuse_factor`` times the noise bound. The flattery
of being the fastest of the search's few candidates is of the order of their noise, and a win
that many bounds wide still stands once that is taken off.
"""

import dataclasses
import enum
from typing import Callable, List, Optional, Sequence, Tuple

from slim_mp.graph_pass.placement.candidate import Candidate, lowered_ops, static_candidate
from slim_mp.graph_pass.placement.context import SearchContext
from slim_mp.graph_pass.placement.noise import NoiseRule
from slim_mp.graph_pass.placement.whole_steps import StepBatch, steps_timed
from slim_mp.timing import Timed


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


# time_static() -> the static step and the all-float32 step timed in rounds of their own (None: failed).
TimeStatic = Callable[[], Optional[Sequence[Optional[Timed]]]]


def check_batch(chosen: Candidate, all_float32: Candidate) -> List[Candidate]:
    """The placements the check times together: the chosen one and all float32 (the reference)."""
    return list(dict.fromkeys([chosen, all_float32]))


def not_checked(why: str) -> StepCheck:
    """The record of a check that could not run, saying why."""
    return StepCheck(CheckVerdict.NOT_CHECKED, f"{why}; the search's choice stands unchecked")


def _low_label(chosen: Candidate, all_float32: Candidate, precision: str) -> str:
    return f"the chosen {precision} placement with {len(lowered_ops(chosen, all_float32.float32_ops))} timed ops low"


def reused_check(timed: Sequence[Candidate], chosen: Candidate, all_float32: Candidate, precision: str,
                 noise: NoiseRule) -> Optional[Tuple[Candidate, StepCheck]]:
    """The check answered by the search's whole steps (``timed``), when the chosen step beat the
    all-float32 one there by more than ``NoiseRule.reuse_factor`` times the noise bound; else None."""
    steps = {c: c for c in timed if c.step_ms is not None}
    chosen_step, float32_step = steps.get(chosen), steps.get(all_float32)
    if chosen_step is None or float32_step is None:
        return None
    if not noise.reusable(chosen_step.step_ms, float32_step.step_ms, chosen_step.step_noise):
        return None
    static_step = steps.get(static_candidate())
    verdict = noise.win_verdict(_low_label(chosen, all_float32, precision), chosen_step.step_ms,
                                  float32_step.step_ms, chosen_step.step_noise)
    reason = f"{verdict.sentence}, in the search's rounds, by more than {noise.reuse_factor:g}x that bound"
    return chosen, StepCheck(CheckVerdict.ACCEPTED, reason, chosen_step.step_ms, float32_step.step_ms,
                             static_step.step_ms if static_step else None, chosen_step.step_noise)


def judge(batch: Sequence[Candidate], times: Sequence[Optional[Timed]], precision: str,
          noise: NoiseRule, time_static: TimeStatic) -> Tuple[Candidate, StepCheck]:
    """The placement kept after timing ``batch`` (``check_batch``'s order) and the check's record.

    ``times``: per candidate of ``batch``, its step and its noise against the all-float32 step.
    ``time_static`` is called only when the chosen placement did not win and is not static itself.
    """
    chosen, all_float32 = batch[0], batch[-1]
    chosen_step, float32_step = times[0], times[-1]
    if chosen_step is None or float32_step is None:
        return chosen, not_checked("the chosen or the all-float32 step did not run")
    static = static_candidate()
    record = dict(chosen_ms=chosen_step.ms, float32_ms=float32_step.ms,
                  static_ms=chosen_step.ms if chosen == static else None, noise=chosen_step.noise)
    verdict = noise.win_verdict(_low_label(chosen, all_float32, precision), chosen_step.ms, float32_step.ms,
                                  chosen_step.noise)
    if verdict.wins:
        return chosen, StepCheck(CheckVerdict.ACCEPTED, verdict.sentence, **record)
    static_times = time_static() if static != chosen else None
    static_step, static_float32 = static_times if static_times else (None, None)
    if static_step is not None and static_float32 is not None:
        record["static_ms"] = static_step.ms
        static_verdict = noise.win_verdict(f"the static {precision} placement", static_step.ms,
                                             static_float32.ms, static_step.noise)
        if static_verdict.wins:
            kept = dataclasses.replace(static, found_as=static.found_as + ("whole-step check",), reasons={})
            return kept, StepCheck(CheckVerdict.STATIC, f"{verdict.sentence}; {static_verdict.sentence}", **record)
    reason = f"kept float32 by the whole-step check: {verdict.sentence}"
    reasons = {name: chosen.reasons.get(name, reason) for name in all_float32.float32_ops}
    kept = dataclasses.replace(all_float32, found_as=all_float32.found_as + ("whole-step check",), reasons=reasons)
    return kept, StepCheck(CheckVerdict.FLOAT32, verdict.sentence, **record)


def whole_step_check(context: SearchContext, chosen: Candidate,
                     timed: Sequence[Candidate]) -> Tuple[Candidate, StepCheck]:
    """The check of ``chosen``: the search's rounds (``timed``) when they answer it (``reused_check``), else its
    step timed beside all float32, then static's when it lost (``judge``); the placement kept and the record."""
    if context.copy is None:
        return chosen, not_checked(context.why_not_copied)
    noise = context.options.tuning.noise
    reused = reused_check(timed, chosen, context.all_float32, context.precision, noise)
    if reused is not None:
        return reused
    static = static_candidate()
    if context.steps is not None:
        context.steps.keep_only([chosen, context.all_float32, static])
    batch = check_batch(chosen, context.all_float32)
    times = steps_timed(context, batch, len(batch) - 1, StepBatch.CHECK)
    if times is None:
        return chosen, not_checked("timing the steps failed")
    return judge(batch, times, context.precision, noise,
                 lambda: steps_timed(context, [static, context.all_float32], 1, StepBatch.STATIC))
