"""Timing primitives of the measured placement: random inputs, a fetch that forces work, round-robin timing.

Shared by the per-op micro-benchmarks (``placement``) and the whole-step timing of candidate
placements (``candidate_steps``), so both measure the same way.
"""

import time
from typing import Callable, List, Optional, Sequence

import tensorflow as tf


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


def fastest_ms(callables: Sequence[Optional[Callable[[], object]]], warmup: int, runs: int) -> List[Optional[float]]:
    """Fastest milliseconds of each callable (None if it is None or fails), after ``warmup`` untimed runs each.

    The callables are timed round-robin, one run of each per round, so the runs of one are spread
    over the whole measurement and a burst of load on a shared machine cannot spoil all of them.
    The minimum, not the median: noise only ever adds time, and the callers compare costs.
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
    for _ in range(runs):
        for index, run in enumerate(working):
            if run is None:
                continue
            started = time.perf_counter()
            run()
            times[index].append((time.perf_counter() - started) * 1000.0)
    return [min(values) if values else None for values in times]
