"""The noise rule: when a timed difference counts, and the verdict of a low-precision time against float32.

A difference is noise unless it exceeds both a floor (``PlacementOptions.noise_fraction``, the 1%
rule) and the noise measured with it (``stopwatch.relative_noise`` of the rounds both were timed
in). Why both: a floor alone trusts a busy machine's timings too much, a measured noise alone
trusts a quiet machine's two lucky rounds. The search (whether to time whole steps, which step
wins) and the whole-step check (``step_check``) decide by this rule only.
"""

import dataclasses
import statistics
from typing import Optional, Sequence


@dataclasses.dataclass(frozen=True)
class NoiseVerdict:
    """Whether a low-precision time beats float32 beyond the noise (``wins``), and the sentence saying so.

    ``sentence`` names both times, the win and which bound decided, e.g. ``bfloat16 0.520 ms vs
    float32 0.550 ms: a 5.8% win is inside this machine's measured noise of 7.0%``.
    """

    wins: bool
    sentence: str


def noise_bound(floor: float, measured_noise: float = 0.0) -> float:
    """The fraction a difference must exceed to count: ``max(floor, measured_noise)``."""
    return max(floor, measured_noise)


def is_noise(smaller_ms: float, larger_ms: float, floor: float, measured_noise: float = 0.0) -> bool:
    """Whether ``larger_ms`` exceeds ``smaller_ms`` by no more than the noise (``noise_bound``)."""
    return larger_ms <= smaller_ms * (1 + noise_bound(floor, measured_noise))


def is_settled(first_ms: float, second_ms: float, floor: float, measured_noise: float, factor: float) -> bool:
    """Whether the two times differ, either way, by more than ``factor`` times the noise bound.

    Then more rounds would not change the verdict: they can only lower each fastest time a little,
    and the bound checked after every round is ``factor`` times the one the verdict uses, so the
    extra chances a sequential look gives a lucky round do not make a win out of noise.
    """
    smaller, larger = sorted((first_ms, second_ms))
    return not is_noise(smaller, larger, factor * floor, factor * measured_noise)


def pooled_noise(pair_noises: Sequence[float]) -> Optional[float]:
    """This machine's noise at the moment the pairs were timed: the median of their measured noises
    (each estimated from a few rounds; the median is robust to the pairs a burst of load hit);
    None without a pair."""
    return statistics.median(pair_noises) if pair_noises else None


def is_clear(first_rounds: Sequence[float], second_rounds: Sequence[float], floor: float, prior_noise: float,
             factor: float) -> bool:
    """Whether every round of one beats every round of the other by more than ``factor`` times the
    noise bound (``prior_noise``: measured before these rounds, on this machine).

    Why it may stop timing after two rounds, before a spread of their own can be measured: a burst of
    load that flatters one variant has to hit every round of the other and none of its own, and the
    rounds alternate which goes first. Only a margin many bounds wide, seen in every round, counts.
    """
    if not first_rounds or not second_rounds:
        return False
    faster, slower = sorted((first_rounds, second_rounds), key=min)
    return not is_noise(max(faster), min(slower), factor * floor, factor * prior_noise)


def win_verdict(low_label: str, low_ms: float, float32_ms: float, floor: float,
                measured_noise: float = 0.0) -> NoiseVerdict:
    """Whether ``low_ms`` (of the placement ``low_label`` names) beats ``float32_ms`` beyond the noise."""
    compared = f"{low_label} {low_ms:.3f} ms vs float32 {float32_ms:.3f} ms"
    if low_ms >= float32_ms:
        return NoiseVerdict(False, f"{compared}: {percent(low_ms / float32_ms - 1 if float32_ms else 0.0)} slower")
    win = percent(float32_ms / low_ms - 1)
    bound = (f"this machine's measured noise of {percent(measured_noise)}" if measured_noise > floor
             else f"the {percent(floor)} noise floor (measured noise {percent(measured_noise)})")
    if is_noise(low_ms, float32_ms, floor, measured_noise):
        return NoiseVerdict(False, f"{compared}: a {win} win is inside {bound}")
    return NoiseVerdict(True, f"{compared}: a {win} win, beyond {bound}")


def percent(fraction: float) -> str:
    """``5.8%`` below 10%, ``12%`` above: enough digits to compare with a noise of a few percent."""
    return f"{fraction:.1%}" if abs(fraction) < 0.1 else f"{fraction:.0%}"
