"""Loss-scale managers: contrib's update rule step by step, checkpoint layout, argument checks.

Expected sequences come from contrib's own unit tests, as listed in
shared/reference/loss_scaling.md section 1.3; the randomised test compares
against a plain-Python model of the rule table in the same section.
"""

import math

import numpy as np
import pytest
import tensorflow as tf

from slim_mp.loss_scale.managers import (
    ExponentialUpdateLossScaleManager,
    FixedLossScaleManager,
    LossScaleManager,
)

tf1 = tf.compat.v1
FLT_MAX = float(np.finfo(np.float32).max)


def run_updates(flags, **manager_kwargs):
    """Run one manager update per flag; return the (scale, good_steps, bad_steps) seen after each."""
    with tf.Graph().as_default():
        manager = ExponentialUpdateLossScaleManager(**manager_kwargs)
        finite = tf1.placeholder(tf.bool, [])
        update = manager.update_loss_scale(finite)
        scale_var, good_var, bad_var = manager.variables()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            history = []
            for flag in flags:
                sess.run(update, {finite: flag})
                history.append(tuple(sess.run([scale_var, good_var, bad_var])))
    return history


def scales(history):
    """The scale column of ``run_updates``' result, as Python floats."""
    return [float(scale) for scale, _, _ in history]


CONTRIB_RATIOS = dict(incr_every_n_steps=2, decr_every_n_nan_or_inf=2, incr_ratio=2, decr_ratio=0.5)


@pytest.mark.parametrize(
    "init, flags, expected",
    [
        (1, [True] * 6, [1, 2, 2, 4, 4, 8]),
        (1024, [False] * 6, [1024, 512, 512, 256, 256, 128]),
        (16, [False] * 10, [16, 8, 8, 4, 4, 2, 2, 1, 1, 1]),
        (1, [True, True, True, False, True], [1, 2, 2, 2, 2]),
        (1, [True, True, True, False, True, False], [1, 2, 2, 2, 2, 1]),
    ],
    ids=["all_finite", "all_nonfinite", "floor_at_one", "bad_clears_good", "good_keeps_bad"],
)
def test_contrib_sequences(init, flags, expected):
    assert scales(run_updates(flags, init_loss_scale=init, **CONTRIB_RATIOS)) == expected


def test_contrib_sequence_with_both_periods_one():
    history = run_updates(
        [True, True, True, False, True, True],
        init_loss_scale=1,
        incr_every_n_steps=1,
        decr_every_n_nan_or_inf=1,
        incr_ratio=2,
        decr_ratio=0.5,
    )
    assert scales(history) == [2, 4, 8, 4, 8, 16]


def test_counters_follow_contrib():
    history = run_updates(
        [True, True, False, True, False, True, True, True],
        init_loss_scale=8,
        incr_every_n_steps=3,
        decr_every_n_nan_or_inf=2,
        incr_ratio=2,
        decr_ratio=0.5,
    )
    counters = [(int(good), int(bad)) for _, good, bad in history]
    # T: good 1; T: good 2; F: bad 1, good 0; T: good 1, bad kept; F: shrink, reset;
    # T, T: good 1, 2; T: grow, reset.
    assert counters == [(1, 0), (2, 0), (0, 1), (1, 1), (0, 0), (1, 0), (2, 0), (0, 0)]
    assert scales(history) == [8, 8, 8, 8, 4, 4, 4, 8]


def contrib_rule(state, finite, incr_n, decr_n, incr_ratio, decr_ratio):
    """One step of contrib's rule (reference section 1.3), in float32 numpy."""
    scale, good, bad = state
    if finite:
        if good + 1 >= incr_n:
            candidate = scale * np.float32(incr_ratio)
            return (candidate if np.isfinite(candidate) else scale), 0, 0
        return scale, good + 1, bad
    if bad + 1 >= decr_n:
        return max(np.float32(1), scale * np.float32(decr_ratio)), 0, 0
    return scale, 0, bad + 1


def test_random_sequence_matches_rule_table():
    rng = np.random.default_rng(7)
    flags = [bool(f) for f in rng.random(60) < 0.7]
    settings = dict(incr_every_n_steps=3, decr_every_n_nan_or_inf=2, incr_ratio=2, decr_ratio=0.8)
    history = run_updates(flags, init_loss_scale=4, **settings)
    state = (np.float32(4), 0, 0)
    for flag, got in zip(flags, history):
        state = contrib_rule(
            state, flag, settings["incr_every_n_steps"], settings["decr_every_n_nan_or_inf"],
            settings["incr_ratio"], settings["decr_ratio"],
        )
        assert (np.float32(got[0]), int(got[1]), int(got[2])) == state


def test_default_ratios_are_contribs():
    history = run_updates([False, False, True, True], init_loss_scale=100.0, incr_every_n_steps=2)
    assert scales(history) == pytest.approx([100.0, 80.0, 80.0, 160.0], rel=1e-7)


def test_growth_stops_at_float32_max_and_resets_counters():
    history = run_updates(
        [True, True, True, True],
        init_loss_scale=FLT_MAX / 4,
        incr_every_n_steps=1,
        incr_ratio=2,
    )
    assert scales(history) == [FLT_MAX / 2, FLT_MAX, FLT_MAX, FLT_MAX]
    assert all(int(good) == 0 and int(bad) == 0 for _, good, bad in history)


def test_shrink_at_floor_keeps_one_and_resets_counters():
    history = run_updates([True, False, False], init_loss_scale=1, incr_every_n_steps=5, decr_every_n_nan_or_inf=1)
    assert [(float(s), int(g), int(b)) for s, g, b in history] == [(1, 1, 0), (1, 0, 0), (1, 0, 0)]


def test_init_below_one_is_raised_to_one_by_first_shrink():
    history = run_updates([False], init_loss_scale=0.25, incr_every_n_steps=5, decr_every_n_nan_or_inf=1)
    assert scales(history) == [1.0]


def test_min_and_max_loss_scale_bound_the_scale():
    history = run_updates(
        [False] * 3 + [True] * 4,
        init_loss_scale=1,
        incr_every_n_steps=1,
        decr_every_n_nan_or_inf=1,
        decr_ratio=0.5,
        min_loss_scale=0.25,
        max_loss_scale=2,
    )
    assert scales(history) == [0.5, 0.25, 0.25, 0.5, 1, 2, 2]


def test_default_saver_writes_contribs_layout(tmp_path):
    path = str(tmp_path / "manager.ckpt")
    with tf.Graph().as_default():
        manager = ExponentialUpdateLossScaleManager(128, 10)
        assert tf1.trainable_variables() == []
        assert manager.get_loss_scale().dtype == tf.float32
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            tf1.train.Saver().save(sess, path)
    reader = tf.train.load_checkpoint(path)
    assert reader.get_variable_to_dtype_map() == {
        "loss_scale": tf.float32,
        "good_steps": tf.int32,
        "bad_steps": tf.int32,
    }
    assert reader.get_tensor("loss_scale") == np.float32(128)


def test_state_round_trips_through_a_checkpoint(tmp_path):
    path = str(tmp_path / "model.ckpt")
    with tf.Graph().as_default():
        manager = ExponentialUpdateLossScaleManager(64, 3, decr_ratio=0.5)
        finite = tf1.placeholder(tf.bool, [])
        update = manager.update_loss_scale(finite)
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for flag in (False, False, True, False):
                sess.run(update, {finite: flag})
            saved_state = sess.run(manager.variables())
            saver.save(sess, path)
    with tf.Graph().as_default():
        manager = ExponentialUpdateLossScaleManager(2, 3)
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            saver.restore(sess, path)
            restored_state = sess.run(manager.variables())
    assert saved_state[0] != 64
    assert [float(x) for x in restored_state] == [float(x) for x in saved_state]


def test_fixed_manager_is_constant_and_stateless():
    manager = FixedLossScaleManager(128)
    for _ in range(2):  # usable in more than one graph
        with tf.Graph().as_default():
            update = manager.update_loss_scale(tf.constant(False))
            assert tf1.global_variables() == [] and manager.variables() == []
            with tf1.Session() as sess:
                sess.run(update)
                assert sess.run(manager.get_loss_scale()) == np.float32(128)
                assert sess.run(manager.at_min_loss_scale())


def test_base_class_is_abstract():
    with pytest.raises(TypeError):
        LossScaleManager()


@pytest.mark.parametrize(
    "value, error",
    [(0.5, ValueError), (0, ValueError), (math.inf, ValueError), (math.nan, ValueError), ("128", TypeError)],
)
def test_fixed_manager_rejects_bad_scale_stricter_than_contrib(value, error):
    with pytest.raises(error, match="loss_scale"):
        FixedLossScaleManager(value)


@pytest.mark.parametrize(
    "argument, value, error",
    [
        ("init_loss_scale", 0, ValueError),
        ("init_loss_scale", -1.0, ValueError),
        ("init_loss_scale", math.inf, ValueError),
        ("init_loss_scale", math.nan, ValueError),
        ("incr_every_n_steps", 0, ValueError),
        ("incr_every_n_steps", -3, ValueError),
        ("incr_every_n_steps", 1.5, TypeError),
        ("decr_every_n_nan_or_inf", 0, ValueError),
        ("incr_ratio", 1, ValueError),
        ("incr_ratio", 0.5, ValueError),
        ("incr_ratio", 0, ValueError),
        ("incr_ratio", -2, ValueError),
        ("incr_ratio", math.inf, ValueError),
        ("decr_ratio", 0, ValueError),
        ("decr_ratio", -0.5, ValueError),
        ("decr_ratio", 1.5, ValueError),
        ("decr_ratio", 1, ValueError),
        ("min_loss_scale", 0, ValueError),
        ("max_loss_scale", 4, ValueError),
    ],
)
def test_exponential_manager_rejects_bad_arguments_stricter_than_contrib(argument, value, error):
    kwargs = dict(init_loss_scale=8, incr_every_n_steps=2)
    kwargs[argument] = value
    with tf.Graph().as_default():
        with pytest.raises(error, match=argument):
            ExponentialUpdateLossScaleManager(**kwargs)
