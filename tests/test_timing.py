"""The project's one clock (``slim_mp.timing``): the noise estimate, interleaved rounds, paired ratios."""

import pytest

from slim_mp import timing


def test_the_noise_is_the_median_absolute_deviation_of_the_paired_ratios():
    # Ratios 1.0, 1.1, 1.2, 1.0, 3.0 (the last round hit by a burst): median 1.1, deviations 0.1, 0, 0.1,
    # 0.1, 1.9, their median 0.1; as a fraction of the median ratio 0.1 / 1.1.
    times, reference = [10.0, 11.0, 12.0, 10.0, 30.0], [10.0] * 5
    assert timing.relative_noise(times, reference) == pytest.approx(0.1 / 1.1)
    assert timing.relative_noise([5.0, 6.0, 7.0], [5.0, 5.0, 7.0]) == pytest.approx(0.0)  # ratios 1, 1.2, 1
    assert timing.relative_noise([10.0, 12.0], [10.0, 10.0]) == 0.0, "two rounds cannot tell their spread"
    low, base = timing.timed_against([times, reference], reference=1)
    assert (low.ms, base.ms, base.noise) == (10.0, 10.0, 0.0) and low.noise == pytest.approx(0.1 / 1.1)


def test_interleaved_rounds_alternate_which_variant_goes_first():
    order = []
    rounds = timing.interleaved_ms([lambda: order.append("float32"), lambda: order.append("low"), None], 4,
                                   warmup=1)
    assert order[:2] == ["float32", "low"], "one warm-up each"
    assert order[2:] == ["float32", "low", "low", "float32", "float32", "low", "low", "float32"]
    assert [len(r) for r in rounds[:2]] == [4, 4] and rounds[2] is None


def test_rounds_stop_for_the_callables_still_open_no_longer_but_never_before_the_third():
    calls = {"settled": 0, "open": 0}
    asked = []

    def still_open(times):
        asked.append([len(values) for values in times])
        return [1]

    rounds = timing.interleaved_ms([lambda: calls.__setitem__("settled", calls["settled"] + 1),
                                    lambda: calls.__setitem__("open", calls["open"] + 1)], 6, still_open=still_open)
    assert asked[0] == [timing.MIN_NOISE_ROUNDS] * 2, "first asked after the third round"
    assert [len(values) for values in rounds] == [timing.MIN_NOISE_ROUNDS, 6]
    assert calls == {"settled": timing.MIN_NOISE_ROUNDS, "open": 6}


def test_rounds_may_be_looked_at_from_an_earlier_round_when_asked():
    asked = []
    timing.interleaved_ms([lambda: None, lambda: None], 4,
                          still_open=lambda times: asked.append(len(times[0])) or [], first_look=2)
    assert asked == [2], "asked after the second round, and nothing was left open"


def test_background_work_is_waited_for_after_the_warm_ups_and_before_the_first_timed_round():
    order = []
    timing.interleaved_ms([lambda: order.append("run")], 2, warmup=1, before_rounds=lambda: order.append("wait"))
    assert order == ["run", "wait", "run", "run"]


def test_rotating_rounds_put_each_variant_first_equally_often():
    order = []
    timing.interleaved_ms([lambda name=name: order.append(name) for name in "abc"], 3, order=timing.RoundOrder.ROTATE)
    assert order == list("abc" "bca" "cab")


def test_a_warm_up_error_drops_the_variant_only_when_asked_and_a_timed_error_always_propagates():
    def fails():
        raise KeyError("no kernel")

    assert timing.interleaved_ms([fails, lambda: None], 2, warmup=1, dropped_on=(KeyError,))[0] is None
    with pytest.raises(KeyError):
        timing.interleaved_ms([fails], 2, warmup=1)
    with pytest.raises(KeyError):
        timing.interleaved_ms([fails], 2, dropped_on=(KeyError,))


def test_progress_hears_every_round_and_the_paired_ratio_is_the_median_of_the_round_ratios():
    heard = []
    timing.interleaved_ms([lambda: None], 3, progress=lambda done, times: heard.append((done, len(times[0]))))
    assert heard == [(1, 1), (2, 2), (3, 3)]
    # Round ratios 4/2, 3/2, 9/3 = 2, 1.5, 3: their median is 2 (the mean would be 2.17).
    assert timing.paired_ratio([4.0, 3.0, 9.0], [2.0, 2.0, 3.0]) == pytest.approx(2.0)
    # A speed-up is float32's time over the fast one's, round by round: ratios 2, 4, 2.
    assert timing.paired_ratio([2.0, 4.0, 6.0], [1.0, 1.0, 3.0]) == pytest.approx(2.0)


def test_median_ms_times_the_run_after_its_warm_up():
    calls = []
    assert timing.median_ms(lambda: calls.append(1), 5, warmup=2) >= 0.0
    assert len(calls) == 7
