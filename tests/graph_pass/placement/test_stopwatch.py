"""The timing primitives (``stopwatch``): the noise estimate and the interleaved rounds."""

import pytest

from slim_mp.graph_pass.placement import stopwatch


def test_the_noise_is_the_median_absolute_deviation_of_the_paired_ratios():
    # Ratios 1.0, 1.1, 1.2, 1.0, 3.0 (the last round hit by a burst): median 1.1, deviations 0.1, 0, 0.1,
    # 0.1, 1.9, their median 0.1; as a fraction of the median ratio 0.1 / 1.1.
    times, reference = [10.0, 11.0, 12.0, 10.0, 30.0], [10.0] * 5
    assert stopwatch.relative_noise(times, reference) == pytest.approx(0.1 / 1.1)
    assert stopwatch.relative_noise([5.0, 6.0, 7.0], [5.0, 5.0, 7.0]) == pytest.approx(0.0)  # ratios 1, 1.2, 1
    assert stopwatch.relative_noise([10.0, 12.0], [10.0, 10.0]) == 0.0, "two rounds cannot tell their spread"
    low, base = stopwatch.timed_against([times, reference], reference=1)
    assert (low.ms, base.ms, base.noise) == (10.0, 10.0, 0.0) and low.noise == pytest.approx(0.1 / 1.1)


def test_interleaved_rounds_alternate_which_variant_goes_first():
    order = []
    rounds = stopwatch.interleaved_ms([lambda: order.append("float32"), lambda: order.append("low"), None],
                                      warmup=1, runs=4)
    assert order[:2] == ["float32", "low"], "one warm-up each"
    assert order[2:] == ["float32", "low", "low", "float32", "float32", "low", "low", "float32"]
    assert [len(r) for r in rounds[:2]] == [4, 4] and rounds[2] is None
