"""The noise rule: when a timed difference counts, and the verdict of a low-precision time against float32.

A difference is noise unless it exceeds both a floor (``NoiseRule.floor``, the 1% rule) and the
noise measured with it (``slim_mp.timing.relative_noise`` of the rounds both were timed in). Why
both: a floor alone trusts a busy machine's timings too much, a measured noise alone trusts a
quiet machine's two lucky rounds. The search (whether to time whole steps, which step wins), the
rounds' early stop and the whole-step check (``step_check``) decide by this rule only: one frozen
``NoiseRule`` (held by ``PlacementTuning.noise``) and its verbs.
"""

import dataclasses
import statistics
from typing import Optional, Sequence

from slim_mp.timing import relative_noise


@dataclasses.dataclass(frozen=True)
class NoiseVerdict:
    """Whether a low-precision time beats float32 beyond the noise (``wins``), and the sentence saying so.

    ``sentence`` names both times, the win and which bound decided, e.g. ``bfloat16 0.520 ms vs
    float32 0.550 ms: a 5.8% win is inside this machine's measured noise of 7.0%``.
    """

    wins: bool
    sentence: str


@dataclasses.dataclass(frozen=True)
class NoiseRule:
    """When a timed difference counts, and when timing may stop.

    ``floor``: a difference is noise unless it exceeds both this fraction and the noise measured with it
    (``bound``). Rounds stop once the two times compared differ, either way, by more than
    ``settle_factor`` bounds (``settled``), a check's whole steps no earlier than round
    ``settle_step_runs``; the whole-step check reuses the search's rounds for a win wider than
    ``reuse_factor`` bounds (``reusable``); a verdict against all float32 stops after two rounds when
    every round is ``clear_factor`` bounds apart (``is_clear``). Why each default is what it is:
    docs/placement.md's tuning table.
    """

    floor: float = 0.01
    settle_factor: float = 2.0
    reuse_factor: float = 4.0
    clear_factor: float = 4.0
    settle_step_runs: int = 7

    def __post_init__(self) -> None:
        if not 0.0 <= self.floor < 1.0:
            raise ValueError(f"NoiseRule(floor={self.floor!r}) must be a fraction in [0, 1), e.g. 0.01 for 1%.")
        for name in ("settle_factor", "reuse_factor", "clear_factor"):
            if getattr(self, name) < 1.0:
                raise ValueError(f"NoiseRule({name}={getattr(self, name)!r}) must be at least 1 (a number of noise "
                                 "bounds), e.g. 2.")
        if self.settle_step_runs < 1:
            raise ValueError(f"NoiseRule(settle_step_runs={self.settle_step_runs!r}) must be at least 1 (a round), "
                             "e.g. 7.")

    def bound(self, measured_noise: float = 0.0) -> float:
        """The fraction a difference must exceed to count: ``max(floor, measured_noise)``."""
        return max(self.floor, measured_noise)

    def is_noise(self, smaller_ms: float, larger_ms: float, measured_noise: float = 0.0, factor: float = 1.0) -> bool:
        """Whether ``larger_ms`` exceeds ``smaller_ms`` by no more than ``factor`` bounds."""
        return larger_ms <= smaller_ms * (1 + factor * self.bound(measured_noise))

    def apart(self, first_ms: float, second_ms: float, measured_noise: float, factor: float) -> bool:
        """Whether the two times differ, either way, by more than ``factor`` times the bound.

        Then more rounds would not change the verdict: they can only lower each fastest time a little,
        and the bound checked after every round is ``factor`` times the one the verdict uses, so the
        extra chances a sequential look gives a lucky round do not make a win out of noise.
        """
        smaller, larger = sorted((first_ms, second_ms))
        return not self.is_noise(smaller, larger, measured_noise, factor)

    def settled(self, rounds: Sequence[float], reference_rounds: Sequence[float]) -> bool:
        """Whether a variant and its reference, timed in the same rounds, are far enough apart to stop
        (``apart`` at ``settle_factor``, with the noise of these rounds)."""
        noise = relative_noise(rounds, reference_rounds)
        return self.apart(min(rounds), min(reference_rounds), noise, self.settle_factor)

    def reusable(self, chosen_ms: float, float32_ms: float, measured_noise: float) -> bool:
        """Whether a chosen step's win in the search's rounds is wide enough (``reuse_factor`` bounds) to
        answer the check."""
        return chosen_ms < float32_ms and self.apart(chosen_ms, float32_ms, measured_noise, self.reuse_factor)

    def is_clear(self, first_rounds: Sequence[float], second_rounds: Sequence[float], prior_noise: float) -> bool:
        """Whether every round of one beats every round of the other by more than ``clear_factor`` bounds
        (``prior_noise``: measured before these rounds, on this machine).

        Why it may stop timing after two rounds, before a spread of their own can be measured: a burst of
        load that flatters one variant has to hit every round of the other and none of its own, and the
        rounds alternate which goes first. Only a margin many bounds wide, seen in every round, counts.
        """
        if not first_rounds or not second_rounds:
            return False
        faster, slower = sorted((first_rounds, second_rounds), key=min)
        return not self.is_noise(max(faster), min(slower), prior_noise, self.clear_factor)

    def win_verdict(self, low_label: str, low_ms: float, float32_ms: float,
                    measured_noise: float = 0.0) -> NoiseVerdict:
        """Whether ``low_ms`` (of the placement ``low_label`` names) beats ``float32_ms`` beyond the noise."""
        compared = f"{low_label} {low_ms:.3f} ms vs float32 {float32_ms:.3f} ms"
        if low_ms >= float32_ms:
            slower = low_ms / float32_ms - 1 if float32_ms else 0.0
            return NoiseVerdict(False, f"{compared}: {percent(slower)} slower")
        win = percent(float32_ms / low_ms - 1)
        bound = (f"this machine's measured noise of {percent(measured_noise)}" if measured_noise > self.floor
                 else f"the {percent(self.floor)} noise floor (measured noise {percent(measured_noise)})")
        if self.is_noise(low_ms, float32_ms, measured_noise):
            return NoiseVerdict(False, f"{compared}: a {win} win is inside {bound}")
        return NoiseVerdict(True, f"{compared}: a {win} win, beyond {bound}")


def pooled_noise(pair_noises: Sequence[float]) -> Optional[float]:
    """This machine's noise at the moment the pairs were timed: the median of their measured noises
    (each estimated from a few rounds; the median is robust to the pairs a burst of load hit);
    None without a pair."""
    return statistics.median(pair_noises) if pair_noises else None


def percent(fraction: float) -> str:
    """``5.8%`` below 10%, ``12%`` above: enough digits to compare with a noise of a few percent."""
    return f"{fraction:.1%}" if abs(fraction) < 0.1 else f"{fraction:.0%}"
