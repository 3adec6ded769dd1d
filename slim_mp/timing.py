"""The project's one clock: a timed call, interleaved rounds, their noise and paired ratios.

Everything that times work on this machine uses it: the measured placement (op pairs and whole
steps), the benchmarks, the step profiler, the device peak and the demo. One way to time means
one set of rules to trust:

- ``run_ms``: milliseconds of one call by the monotonic performance counter; an error the call
  raises propagates unchanged, so the caller decides what a failure means;
- ``interleaved_ms``: variants timed in rounds, every variant once per round, the order changing
  from round to round (``RoundOrder``), so a burst of load on a shared machine hits all variants
  alike instead of spoiling one; rounds may stop early once the caller's verdict is settled;
- ``relative_noise`` / ``timed_against``: the noise of a comparison, read from the spread of the
  per-round ratios, and each variant's fastest time with that noise (``Timed``);
- ``paired_ratio``: the median of the per-round ratios, the figure a benchmark reports.

When a difference counts (the noise rule) is the placement's decision, not the clock's:
``slim_mp.graph_pass``'s ``NoiseRule``.
"""

import dataclasses
import enum
import statistics
import time
from typing import Callable, Collection, List, Optional, Sequence, Tuple, Type

# Fewer paired rounds than this say nothing about their spread (the MAD of two ratios is always 0).
MIN_NOISE_ROUNDS = 3

# still_open(times so far per variant) -> the variants whose rounds go on (``interleaved_ms``).
StillOpen = Callable[[List[List[float]]], Collection[int]]
# progress(rounds done, times so far per variant), called after every round.
RoundProgress = Callable[[int, List[List[float]]], None]


@dataclasses.dataclass(frozen=True)
class Timed:
    """A variant's fastest milliseconds over the rounds, and the noise of comparing it with the reference.

    ``noise``: ``relative_noise`` of its rounds against the reference variant's (0 for the reference
    itself, and when too few rounds ran to tell).
    """

    ms: float
    noise: float = 0.0


class RoundOrder(enum.Enum):
    """The order the variants run in, round by round.

    ``ALTERNATE``: the given order in even rounds, reversed in odd ones, so of any two variants each
    goes first in half the rounds (a float32 variant and its low twin, side by side). ``ROTATE``:
    ``A B C``, ``B C A``, ``C A B``, ...: each variant goes first equally often, and follows each other
    variant as often (a benchmark of several configurations).
    """

    ALTERNATE = "alternate"
    ROTATE = "rotate"

    def arrange(self, order: Sequence[int], round_index: int) -> List[int]:
        """``order`` as this policy runs it in round ``round_index``."""
        if self is RoundOrder.ALTERNATE:
            return list(order) if round_index % 2 == 0 else list(order)[::-1]
        shift = round_index % len(order) if order else 0
        return list(order[shift:]) + list(order[:shift])


def run_ms(run: Callable[[], object]) -> float:
    """Milliseconds one call of ``run`` takes, by the monotonic performance counter (errors propagate)."""
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) * 1000.0


def interleaved_ms(runs: Sequence[Optional[Callable[[], object]]], rounds: int, *, warmup: int = 0,
                   order: RoundOrder = RoundOrder.ALTERNATE, still_open: Optional[StillOpen] = None,
                   first_look: int = MIN_NOISE_ROUNDS, before_rounds: Optional[Callable[[], object]] = None,
                   dropped_on: Tuple[Type[BaseException], ...] = (),
                   progress: Optional[RoundProgress] = None) -> List[Optional[List[float]]]:
    """Milliseconds of every timed call of each variant, in up to ``rounds`` interleaved rounds.

    First ``warmup`` untimed calls of each variant; a variant whose warm-up raises one of
    ``dropped_on`` is dropped (None, like a variant given as None), any other error propagates.
    ``before_rounds`` is called once between the warm-ups and the first timed round (to wait for
    background work, so that nothing else runs while rounds are timed). Then each round calls every
    variant still going once, in ``order``. ``still_open``, asked after every round from the
    ``first_look``-th on, names the variants that go on; the rest stop there (their verdict is
    settled), and the rounds end when none is left. ``progress`` hears of every finished round.
    An error a timed call raises propagates.
    """
    working: List[Optional[Callable[[], object]]] = []
    for run in runs:
        try:
            for _ in range(warmup if run is not None else 0):
                run()
        except dropped_on:
            run = None
        working.append(run)
    if before_rounds is not None:
        before_rounds()
    times: List[List[float]] = [[] for _ in working]
    going = [index for index, run in enumerate(working) if run is not None]
    for round_index in range(rounds):
        for index in order.arrange(going, round_index):
            times[index].append(run_ms(working[index]))
        if progress is not None:
            progress(round_index + 1, times)
        if still_open is not None and round_index + 1 >= first_look:
            open_now = set(still_open(times))
            going = [index for index in going if index in open_now]
            if not going:
                break
    return [values if values else None for values in times]


def relative_noise(times: Sequence[float], reference: Sequence[float]) -> float:
    """The noise of comparing ``times`` with ``reference``, timed in the same rounds, as a fraction.

    The statistic: the median absolute deviation (MAD) of the per-round ratios ``times[i] /
    reference[i]`` from their median, divided by that median. Why: two runs of one round are
    milliseconds apart, so a ratio cancels the slow drifts of a shared machine and its spread is
    the noise that can flip a comparison; the MAD ignores up to half the rounds being hit by a burst
    of load (a standard deviation is dominated by the one round a burst hit); and divided by the
    median it is in the units of the win it bounds ("a 5% win"). Fewer than ``MIN_NOISE_ROUNDS``
    rounds: 0, the spread is unknown (the noise rule's floor then bounds alone).
    """
    ratios = [value / base for value, base in zip(times, reference) if base > 0]
    if len(ratios) < MIN_NOISE_ROUNDS:
        return 0.0
    middle = statistics.median(ratios)
    return statistics.median(abs(ratio - middle) for ratio in ratios) / middle


def timed_against(rounds: Sequence[Optional[List[float]]], reference: int) -> List[Optional[Timed]]:
    """Per variant of ``interleaved_ms``: its fastest milliseconds and its noise against variant ``reference``.

    The fastest, not the median: load only ever adds time, and the callers compare costs.
    """
    base = rounds[reference] if 0 <= reference < len(rounds) else None
    return [None if values is None else
            Timed(min(values), relative_noise(values, base) if base is not None and index != reference else 0.0)
            for index, values in enumerate(rounds)]


def paired_ratio(times: Sequence[float], baseline: Sequence[float]) -> float:
    """The median over rounds of ``times[i] / baseline[i]`` (both timed in the same rounds).

    Each pair ran seconds apart, so the slow drifts of a shared machine cancel out of each ratio.
    """
    return statistics.median(value / base for value, base in zip(times, baseline))


def median_ms(run: Callable[[], object], runs: int, warmup: int = 1) -> float:
    """The median milliseconds of ``runs`` timed calls of ``run`` alone, after ``warmup`` untimed ones."""
    (values,) = interleaved_ms([run], runs, warmup=warmup)
    return statistics.median(values)
