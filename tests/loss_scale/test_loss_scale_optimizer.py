"""LossScaleOptimizer: same updates as the unwrapped float32 optimizer, skipped overflow steps, guard, checkpoints."""

import numpy as np
import pytest
import tensorflow as tf
from quadratic import INITIAL_W, build_quadratic, save_contrib_checkpoint, train_on_batches

from slim_mp.loss_scale.managers import (
    ExponentialUpdateLossScaleManager,
    FixedLossScaleManager,
    NoLossScaling,
)
from slim_mp.loss_scale.optimizer import LossScaleOptimizer, scale_loss

tf1 = tf.compat.v1

INPUTS = np.array([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0], [-0.7, 0.4, 1.1], [2.0, 0.1, -0.3], [0.2, 0.9, 0.6]], np.float32)
NOT_FINITE = np.array([np.inf, 1.0, np.nan], np.float32)

OPTIMIZERS = {
    "sgd": lambda: tf1.train.GradientDescentOptimizer(0.1),
    "momentum": lambda: tf1.train.MomentumOptimizer(0.05, 0.9),
    "adam": lambda: tf1.train.AdamOptimizer(0.01),
}


def train(optimizer_name, rows, make_manager=None):
    """Train the quadratic one step per row; return {name: value} of every global variable.

    With ``make_manager`` the optimizer is wrapped in a LossScaleOptimizer
    (divergence guard off); without it, this is the float32 reference.
    """
    with tf.Graph().as_default():
        _, x, loss = build_quadratic()
        global_step = tf1.train.get_or_create_global_step()
        optimizer = OPTIMIZERS[optimizer_name]()
        if make_manager is not None:
            optimizer = LossScaleOptimizer(optimizer, make_manager(), max_consecutive_skips_at_min=None)
        return train_on_batches(optimizer.minimize(loss, global_step=global_step), x, rows)


def assert_same_model_state(reference, actual, rtol):
    """Every variable of ``reference`` (model, slots, global step) matches ``actual`` within ``rtol``."""
    for name, value in reference.items():
        np.testing.assert_allclose(actual[name], value, rtol=rtol, atol=0, err_msg=name)


def test_one_sgd_step_at_scale_128_equals_plain_sgd():
    reference = train("sgd", INPUTS[:1])
    scaled = train("sgd", INPUTS[:1], lambda: FixedLossScaleManager(128))
    # 128 is a power of two: scaling and unscaling are exact, so the tolerance is zero.
    assert_same_model_state(reference, scaled, rtol=0)
    assert not np.array_equal(reference["w"], INITIAL_W)


@pytest.mark.parametrize("optimizer_name", ["sgd", "momentum", "adam"])
def test_no_loss_scaling_steps_exactly_as_the_unwrapped_optimizer_even_on_inf(optimizer_name):
    # bfloat16's default: not scaled, not skipped. A non-finite row reaches the weights as in float32.
    rows = np.concatenate([INPUTS[:2], NOT_FINITE[None], INPUTS[2:3]])
    reference = train(optimizer_name, rows)
    unscaled = train(optimizer_name, rows, NoLossScaling)
    assert set(unscaled) == set(reference)
    for name, value in reference.items():
        np.testing.assert_array_equal(unscaled[name], value, err_msg=name)
    assert not np.isfinite(reference["w"]).all(), "precondition: the inf row poisons float32's weights"


def test_no_loss_scaling_adds_no_check_and_reports_scale_1_and_no_skips():
    with tf.Graph().as_default():
        _, x, loss = build_quadratic()
        optimizer = LossScaleOptimizer(tf1.train.GradientDescentOptimizer(0.1), NoLossScaling())
        train_op = optimizer.minimize(loss)
        reachable, stack = set(), [train_op]
        while stack:
            op = stack.pop()
            if op not in reachable:
                reachable.add(op)
                stack.extend([t.op for t in op.inputs] + list(op.control_inputs))
        assert not {op.type for op in reachable} & {"IsFinite", "If", "StatelessIf", "Switch"}
        with tf1.Session() as sess:
            sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            sess.run(train_op, {x: NOT_FINITE})
            assert sess.run([optimizer.loss_scale, optimizer.skipped_steps]) == [1.0, 0]


@pytest.mark.parametrize("optimizer_name", ["momentum", "adam"])
def test_several_steps_match_the_unwrapped_optimizer(optimizer_name):
    reference = train(optimizer_name, INPUTS)
    scaled = train(
        optimizer_name, INPUTS, lambda: ExponentialUpdateLossScaleManager(1024, incr_every_n_steps=2)
    )
    assert scaled["loss_scale"] == 4096  # the scale grew twice in five finite steps
    assert_same_model_state(reference, scaled, rtol=1e-6)


@pytest.mark.parametrize("optimizer_name", ["momentum", "adam"])
def test_non_finite_step_changes_nothing_but_the_scale(optimizer_name):
    def manager():
        return ExponentialUpdateLossScaleManager(1024, 100, decr_every_n_nan_or_inf=1, decr_ratio=0.5)

    before = train(optimizer_name, INPUTS[:2], manager)
    after = train(optimizer_name, [INPUTS[0], NOT_FINITE, INPUTS[1]], manager)
    assert before["global_step"] == 2 and after["global_step"] == 2
    model_state = {k: v for k, v in before.items() if k not in ("loss_scale", "good_steps", "bad_steps")}
    assert_same_model_state(model_state, after, rtol=0)
    assert before["loss_scale"] == 1024 and after["loss_scale"] == 512


def test_fixed_manager_skips_non_finite_steps_too():
    before = train("momentum", INPUTS[:1], lambda: FixedLossScaleManager(8))
    after = train("momentum", [INPUTS[0], NOT_FINITE], lambda: FixedLossScaleManager(8))
    assert_same_model_state(before, after, rtol=0)


def test_compute_gradients_returns_unscaled_pairs_and_passes_none():
    with tf.Graph().as_default():
        w, x, loss = build_quadratic()
        unused = tf1.get_variable("unused", initializer=1.0)
        plain = tf1.train.GradientDescentOptimizer(0.1)
        scaled = LossScaleOptimizer(plain, FixedLossScaleManager(2.0**12))
        pairs = scaled.compute_gradients(loss, var_list=[w, unused])
        reference = plain.compute_gradients(loss, var_list=[w])
        assert [v for _, v in pairs] == [w, unused] and pairs[1][0] is None
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            got, expected = sess.run([pairs[0][0], reference[0][0]], {x: INPUTS[0]})
    np.testing.assert_array_equal(got, expected)  # power-of-two scale: exact


def test_grad_loss_of_an_fp16_loss_is_honoured():
    def gradient(dtype, wrap):
        with tf.Graph().as_default():
            w = tf1.get_variable("w", initializer=1.5)
            loss = tf.cast(w, dtype) * tf.constant(3.0, dtype)
            optimizer = tf1.train.GradientDescentOptimizer(0.1)
            if wrap:
                optimizer = LossScaleOptimizer(optimizer, FixedLossScaleManager(256))
            grad = optimizer.compute_gradients(loss, var_list=[w], grad_loss=tf.constant(2.0, dtype))[0][0]
            with tf1.Session() as sess:
                sess.run(tf1.global_variables_initializer())
                return sess.run(grad)

    assert gradient(tf.float16, wrap=True) == gradient(tf.float32, wrap=False) == np.float32(6.0)


def test_minimize_ignores_variables_without_gradient():
    with tf.Graph().as_default():
        _, x, loss = build_quadratic()
        unused = tf1.get_variable("unused", initializer=3.0)
        optimizer = LossScaleOptimizer(tf1.train.GradientDescentOptimizer(0.1), FixedLossScaleManager(4))
        train_op = optimizer.minimize(loss, var_list=tf1.trainable_variables())
        with tf1.Session() as sess:
            sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            sess.run(train_op, {x: INPUTS[0]})
            assert sess.run(unused) == np.float32(3.0)


def fp16_chain_gradient(dtype, loss_scale=None):
    """Return d/dw of (w * 2**-12) * 2**-14 computed in ``dtype`` (2**-26: below fp16's smallest subnormal)."""
    with tf.Graph().as_default():
        w = tf1.get_variable("w", initializer=1.0)
        loss = (tf.cast(w, dtype) * tf.constant(2.0**-12, dtype)) * tf.constant(2.0**-14, dtype)
        optimizer = tf1.train.GradientDescentOptimizer(1.0)
        if loss_scale is not None:
            optimizer = LossScaleOptimizer(optimizer, FixedLossScaleManager(loss_scale))
        grad = optimizer.compute_gradients(loss, var_list=[w])[0][0]
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            return sess.run(grad)


def test_fp16_gradient_that_underflows_unscaled_comes_back_exactly():
    reference = fp16_chain_gradient(tf.float32)
    assert reference == np.float32(2.0**-26)
    assert fp16_chain_gradient(tf.float16) == 0  # unscaled fp16 loses it
    assert fp16_chain_gradient(tf.float16, loss_scale=2.0**10) == reference  # exact: power-of-two scale


def test_fp16_loss_is_scaled_in_float32():
    with tf.Graph().as_default():
        scaled = scale_loss(tf.constant(2.0, tf.float16), tf.constant(2.0**17))
        assert scaled.dtype == tf.float32
        with tf1.Session() as sess:
            assert sess.run(scaled) == np.float32(2.0**18)  # contrib's fp16 cast of the scale gives inf


def run_sparse(feed_values, wrap):
    """Train an embedding through a gather; return (gradient type, final table)."""
    with tf.Graph().as_default():
        table = tf1.get_variable("table", initializer=np.arange(12, dtype=np.float32).reshape(4, 3))
        weights = tf1.placeholder(tf.float32, [2, 3])
        loss = tf.reduce_sum(tf.gather(table, [0, 2]) * weights)
        optimizer = tf1.train.MomentumOptimizer(0.1, 0.9)
        if wrap:
            optimizer = LossScaleOptimizer(optimizer, FixedLossScaleManager(64))
        pairs = optimizer.compute_gradients(loss)
        train_op = optimizer.apply_gradients(pairs)
        with tf1.Session() as sess:
            sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            for value in feed_values:
                sess.run(train_op, {weights: value})
            return type(pairs[0][0]), sess.run(table)


def test_sparse_gradients_stay_sparse_and_match_the_inner_optimizer():
    feeds = [np.full((2, 3), 0.5, np.float32), np.full((2, 3), -1.25, np.float32)]
    reference_type, reference = run_sparse(feeds, wrap=False)
    scaled_type, scaled = run_sparse(feeds, wrap=True)
    assert reference_type is tf.IndexedSlices and scaled_type is tf.IndexedSlices
    np.testing.assert_array_equal(scaled, reference)  # power-of-two scale: exact


def test_non_finite_sparse_gradient_skips_the_step():
    finite = np.full((2, 3), 0.5, np.float32)
    broken = finite.copy()
    broken[1, 2] = np.nan
    _, reference = run_sparse([finite], wrap=True)
    _, skipped = run_sparse([finite, broken], wrap=True)
    np.testing.assert_array_equal(skipped, reference)


def test_slots_variables_and_skip_counters():
    with tf.Graph().as_default():
        w, x, loss = build_quadratic()
        inner = tf1.train.MomentumOptimizer(0.1, 0.9)
        manager = ExponentialUpdateLossScaleManager(8, 10, decr_every_n_nan_or_inf=1, decr_ratio=0.5)
        optimizer = LossScaleOptimizer(inner, manager)
        train_op = optimizer.minimize(loss)
        assert optimizer.get_slot(w, "momentum") is inner.get_slot(w, "momentum") is not None
        assert optimizer.get_slot_names() == ["momentum"]
        assert set(inner.variables() + manager.variables()) <= set(optimizer.variables())
        # the skip counters stay out of the default Saver's global variables
        saved_names = {v.op.name for v in tf1.global_variables()}
        assert saved_names == {"w", "w/Momentum", "loss_scale", "good_steps", "bad_steps"}
        summaries = tf1.summary.merge_all()
        with tf1.Session() as sess:
            sess.run(tf1.variables_initializer(optimizer.variables() + [w]))
            for row in (INPUTS[0], NOT_FINITE, INPUTS[1], NOT_FINITE):
                sess.run(train_op, {x: row})
            scale, skipped, serialized = sess.run([optimizer.loss_scale, optimizer.skipped_steps, summaries])
    assert (scale, skipped) == (2, 2)
    values = {v.tag: v.simple_value for v in tf1.Summary.FromString(serialized).value}
    assert values == {"LossScaleOptimizer/loss_scale": 2.0, "LossScaleOptimizer/skipped_steps": 2.0}


def test_contrib_checkpoint_restores_with_a_default_saver(tmp_path):
    path = str(tmp_path / "contrib.ckpt")
    save_contrib_checkpoint(path, INITIAL_W * 2, bad_steps=1)
    with tf.Graph().as_default():
        w, x, loss = build_quadratic()
        manager = ExponentialUpdateLossScaleManager(8, incr_every_n_steps=2, decr_ratio=0.5)
        optimizer = LossScaleOptimizer(tf1.train.GradientDescentOptimizer(0.1), manager)
        train_op = optimizer.minimize(loss)
        with tf1.Session() as sess:
            tf1.train.Saver().restore(sess, path)
            sess.run(tf1.local_variables_initializer())
            assert sess.run(optimizer.loss_scale) == 512
            np.testing.assert_array_equal(sess.run(w), INITIAL_W * 2)
            sess.run(train_op, {x: INPUTS[0]})  # good_steps was 1: this finite step doubles the scale
            assert sess.run(optimizer.loss_scale) == 1024
            sess.run(train_op, {x: NOT_FINITE})  # bad_steps was reset by the growth: no shrink yet
            assert sess.run([optimizer.loss_scale, optimizer.skipped_steps]) == [1024, 1]


def test_state_round_trips_through_a_checkpoint(tmp_path):
    path = str(tmp_path / "lso.ckpt")

    def build():
        w, x, loss = build_quadratic()
        manager = ExponentialUpdateLossScaleManager(64, 3, decr_every_n_nan_or_inf=1, decr_ratio=0.5)
        optimizer = LossScaleOptimizer(tf1.train.AdamOptimizer(0.01), manager)
        return x, optimizer.minimize(loss), tf1.global_variables()

    with tf.Graph().as_default():
        x, train_op, state = build()
        with tf1.Session() as sess:
            sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            for row in (INPUTS[0], NOT_FINITE, INPUTS[1]):
                sess.run(train_op, {x: row})
            saved = sess.run(state)
            tf1.train.Saver().save(sess, path)
    with tf.Graph().as_default():
        _, _, state = build()
        with tf1.Session() as sess:
            tf1.train.Saver().restore(sess, path)
            restored = sess.run(state)
    for before, after in zip(saved, restored):
        np.testing.assert_array_equal(after, before)
    assert not any("skip" in name for name, _ in tf.train.list_variables(path))


def guarded_training(flags, manager, limit):
    """Train two variables, ``healthy`` and ``broken``; ``broken``'s gradient is NaN where flags is False.

    Returns how many steps ran before the guard raised, and the error message ('' if it never did).
    """
    with tf.Graph().as_default():
        healthy = tf1.get_variable("healthy", initializer=[1.0, 2.0])
        broken = tf1.get_variable("broken", initializer=[3.0])
        poison = tf1.placeholder(tf.float32, [])
        loss = tf.reduce_sum(tf.square(healthy)) + tf.reduce_sum(broken * poison)
        optimizer = LossScaleOptimizer(tf1.train.GradientDescentOptimizer(0.1), manager(), limit)
        train_op = optimizer.minimize(loss)
        with tf1.Session() as sess:
            sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            for step, flag in enumerate(flags):
                try:
                    sess.run(train_op, {poison: 1.0 if flag else np.nan})
                except tf.errors.InvalidArgumentError as error:
                    return step, error.message
    return len(flags), ""


def test_divergence_guard_names_the_variable_with_non_finite_gradients():
    steps, message = guarded_training([False] * 5, lambda: FixedLossScaleManager(1), limit=3)
    assert steps == 2  # the third skipped step in a row fails
    assert "broken" in message and "healthy" not in message
    assert "bfloat16" in message and "deny list" in message


def test_divergence_guard_counts_only_consecutive_skips_at_the_minimum_scale():
    def manager():
        return ExponentialUpdateLossScaleManager(2, 100, decr_every_n_nan_or_inf=1, decr_ratio=0.5)

    # 2 -> 1 (not yet at the minimum), then 1 skip, a finite step resets, then 2 skips in a row fire.
    steps, message = guarded_training([False, False, True, False, False, False], manager, limit=2)
    assert steps == 4 and "broken" in message


def test_divergence_guard_can_be_disabled():
    steps, message = guarded_training([False] * 4, lambda: FixedLossScaleManager(1), limit=None)
    assert (steps, message) == (4, "")


def test_apply_gradients_without_any_gradient_raises():
    with tf.Graph().as_default():
        w = tf1.get_variable("w", initializer=1.0)
        optimizer = LossScaleOptimizer(tf1.train.GradientDescentOptimizer(0.1), FixedLossScaleManager(2))
        with pytest.raises(ValueError, match="grads_and_vars"):
            optimizer.apply_gradients([(None, w)])


def test_ref_variables_raise_a_clear_error():
    with tf.Graph().as_default():
        w = tf1.get_variable("w", initializer=1.0, use_resource=False)
        optimizer = LossScaleOptimizer(tf1.train.GradientDescentOptimizer(0.1), FixedLossScaleManager(2))
        with pytest.raises(TypeError, match="use_resource=True"):
            optimizer.minimize(w * 2.0)


@pytest.mark.parametrize(
    "make_args, error, argument",
    [
        (lambda: ("sgd", FixedLossScaleManager(2)), TypeError, "opt"),
        (lambda: (tf1.train.GradientDescentOptimizer(0.1), 128), TypeError, "loss_scale_manager"),
        (lambda: (tf1.train.GradientDescentOptimizer(0.1), FixedLossScaleManager(2), 0), ValueError,
         "max_consecutive_skips_at_min"),
        (lambda: (tf1.train.GradientDescentOptimizer(0.1), FixedLossScaleManager(2), 2.5), ValueError,
         "max_consecutive_skips_at_min"),
    ],
)
def test_bad_arguments_name_the_argument_stricter_than_contrib(make_args, error, argument):
    with pytest.raises(error, match=argument):
        LossScaleOptimizer(*make_args())
