"""The timing primitives (``stopwatch``): the noise estimate and the interleaved rounds."""

import numpy as np
import pytest
import tensorflow as tf

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


def test_rounds_stop_for_the_callables_still_open_no_longer_but_never_before_the_third():
    calls = {"settled": 0, "open": 0}
    asked = []

    def still_open(times):
        asked.append([len(values) for values in times])
        return [1]

    rounds = stopwatch.interleaved_ms([lambda: calls.__setitem__("settled", calls["settled"] + 1),
                                       lambda: calls.__setitem__("open", calls["open"] + 1)],
                                      warmup=0, runs=6, still_open=still_open)
    assert asked[0] == [stopwatch.MIN_NOISE_ROUNDS] * 2, "first asked after the third round"
    assert [len(values) for values in rounds] == [stopwatch.MIN_NOISE_ROUNDS, 6]
    assert calls == {"settled": stopwatch.MIN_NOISE_ROUNDS, "open": 6}


def test_variables_start_at_their_initial_values_and_load_new_ones():
    graph = tf.Graph()
    with graph.as_default():
        read = stopwatch.variable_of(tf.fill([2, 3], 1.5))
        labels = stopwatch.random_variable([4], tf.int64)
        init = stopwatch.variables_initializer()
    assert read.op.type == "ReadVariableOp" and not graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        np.testing.assert_array_equal(session.run(read), np.full([2, 3], 1.5, np.float32))
        np.testing.assert_array_equal(session.run(labels), np.zeros([4], np.int64))
        stopwatch.load_variables(session, {read: np.arange(6, dtype=np.float32).reshape(2, 3)})
        np.testing.assert_array_equal(session.run(read), np.arange(6).reshape(2, 3))
        np.testing.assert_array_equal(session.run(labels), np.zeros([4], np.int64))


def test_random_variables_repeat_one_block_of_small_normals_and_integers_start_at_zero():
    size = stopwatch.RANDOM_BLOCK_SIZE
    graph = tf.Graph()
    with graph.as_default():
        large = stopwatch.random_variable([3, size], tf.float32)
        odd = stopwatch.random_variable([7, 5], tf.bfloat16)
        labels = stopwatch.random_variable([4], tf.int32)
        init = stopwatch.variables_initializer()
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        values, odd_values, label_values = session.run([large, tf.cast(odd, tf.float32), labels])
    assert values.shape == (3, size) and odd_values.shape == (7, 5)
    np.testing.assert_array_equal(values[0], values[1], "the block repeats")
    # N(0, 0.1^2) over 4099 draws: the standard deviation within 10% of 0.1, the mean within 0.01.
    assert abs(values[0].std() - 0.1) < 0.01 and abs(values[0].mean()) < 0.01
    np.testing.assert_allclose(odd_values.ravel(), values.ravel()[:35], rtol=1e-2, atol=1e-3)
    np.testing.assert_array_equal(label_values, np.zeros([4], np.int32))
    assert len(graph.get_collection("slim_mp_placement_random_block")) == 1, "one block per graph"


def test_rounds_may_be_looked_at_from_an_earlier_round_when_asked():
    asked = []
    stopwatch.interleaved_ms([lambda: None, lambda: None], warmup=0, runs=4,
                             still_open=lambda times: asked.append(len(times[0])) or [], first_look=2)
    assert asked == [2], "asked after the second round, and nothing was left open"


def test_background_work_is_waited_for_after_the_warm_ups_and_before_the_first_timed_round():
    order = []
    stopwatch.interleaved_ms([lambda: order.append("run")], warmup=1, runs=2,
                             before_rounds=lambda: order.append("wait"))
    assert order == ["run", "wait", "run", "run"]
