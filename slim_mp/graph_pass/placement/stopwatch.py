"""Timing primitives of the measured placement: random inputs, a fetch that forces work, interleaved rounds.

Shared by the per-op micro-benchmarks (``micro_benchmark``) and the whole-step timing of candidate
placements (``whole_steps``), so both measure the same way: every variant once per round, rounds
repeated, and a noise estimate taken from the rounds (``relative_noise``).
"""

import dataclasses
import statistics
import time
from typing import Callable, List, Optional, Sequence

import tensorflow as tf

# Fewer paired rounds than this say nothing about their spread (the MAD of two ratios is always 0).
MIN_NOISE_ROUNDS = 3


@dataclasses.dataclass(frozen=True)
class Timed:
    """A variant's fastest milliseconds over the rounds, and the noise of comparing it with the reference.

    ``noise``: ``relative_noise`` of its rounds against the reference variant's (0 for the reference
    itself, and when too few rounds ran to tell).
    """

    ms: float
    noise: float = 0.0


def random_variable(shape: Sequence[int], dtype: tf.DType) -> tf.Tensor:
    """The read of a variable of ``shape`` initialised in the graph (no large constants to copy around).

    Floating types get small random normals; integer and boolean types zeros (valid labels and indices).
    """
    if dtype.is_floating:
        initial = tf.cast(tf.random.normal(list(shape), stddev=0.1, seed=0), dtype)
    else:
        initial = tf.zeros(list(shape), dtype)
    # value(): a bare ReadVariableOp, a source the painter leaves alone (read_value() adds an Identity
    # it would paint, cutting the gradient off from the returned tensor).
    return tf.Variable(initial, trainable=False).value()


def first_values(tensors: Sequence[tf.Tensor]) -> tf.Tensor:
    """One element of each tensor, as float32: a fetch that needs every tensor computed in full.

    (Grappler prunes stateless ops that are only control dependencies of the fetched op.)
    """
    return tf.stack([tf.cast(tf.reshape(t, [-1])[0], tf.float32) for t in tensors])


def relative_noise(times: Sequence[float], reference: Sequence[float]) -> float:
    """The noise of comparing ``times`` with ``reference``, timed in the same rounds, as a fraction.

    The statistic: the median absolute deviation (MAD) of the per-round ratios ``times[i] /
    reference[i]`` from their median, divided by that median. Why: two runs of one round are
    milliseconds apart, so a ratio cancels the slow drifts of a shared machine and its spread is
    the noise that can flip a comparison; the MAD ignores up to half the rounds being hit by a burst
    of load (a standard deviation is dominated by the one round a burst hit); and divided by the
    median it is in the units of the win it bounds ("a 5% win"). Fewer than ``MIN_NOISE_ROUNDS``
    rounds: 0, the spread is unknown (``PlacementOptions.noise_fraction`` then bounds alone).
    """
    ratios = [value / base for value, base in zip(times, reference) if base > 0]
    if len(ratios) < MIN_NOISE_ROUNDS:
        return 0.0
    middle = statistics.median(ratios)
    return statistics.median(abs(ratio - middle) for ratio in ratios) / middle


def run_ms(run: Callable[[], object]) -> float:
    """Milliseconds one call of ``run`` takes, by the monotonic performance counter.

    The one stopwatch of the project (placement, benchmarks, device peaks): an error ``run`` raises
    (an op's own ``OpError``, say) propagates unchanged, so a caller decides what a failure means.
    """
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) * 1000.0


def interleaved_ms(callables: Sequence[Optional[Callable[[], object]]], warmup: int,
                   runs: int) -> List[Optional[List[float]]]:
    """Milliseconds of every timed run of each callable (None if it is None or fails its warm-up).

    After ``warmup`` untimed runs each, ``runs`` rounds run each callable once: even rounds in the
    given order, odd rounds reversed, so within any two callables each goes first in half the rounds
    (a float32 variant and its low twin alternate) and a burst of load on a shared machine hits all
    variants alike instead of spoiling one.
    """
    working: List[Optional[Callable[[], object]]] = []
    for run in callables:
        try:
            for _ in range(warmup if run is not None else 0):
                run()
        except tf.errors.OpError:
            run = None
        working.append(run)
    times: List[List[float]] = [[] for _ in working]
    order = [index for index, run in enumerate(working) if run is not None]
    for round_index in range(runs):
        for index in (order if round_index % 2 == 0 else order[::-1]):
            times[index].append(run_ms(working[index]))
    return [values if values else None for values in times]


def timed_against(rounds: Sequence[Optional[List[float]]], reference: int) -> List[Optional[Timed]]:
    """Per variant of ``interleaved_ms``: its fastest milliseconds and its noise against variant ``reference``.

    The fastest, not the median: load only ever adds time, and the callers compare costs.
    """
    base = rounds[reference] if 0 <= reference < len(rounds) else None
    return [None if values is None else
            Timed(min(values), relative_noise(values, base) if base is not None and index != reference else 0.0)
            for index, values in enumerate(rounds)]
