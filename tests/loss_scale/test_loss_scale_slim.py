"""LossScaleOptimizer in TF-Slim training (create_train_op options, the clone pattern) against float32 references."""

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from quadratic import train_on_batches

from slim_mp.loss_scale.managers import ExponentialUpdateLossScaleManager, FixedLossScaleManager
from slim_mp.loss_scale.optimizer import LossScaleOptimizer

tf1 = tf.compat.v1

RNG = np.random.default_rng(3)
HIDDEN_W = RNG.normal(size=(3, 4)).astype(np.float32)
OUTPUT_W = RNG.normal(size=(4, 2)).astype(np.float32)
INPUTS = RNG.normal(size=(4, 3)).astype(np.float32)
LABELS = (10.0 * RNG.normal(size=(4, 2))).astype(np.float32)  # large errors: gradient norms well above 1
SCALE = 1024.0
RTOL = 1e-6  # float32 rounding of a few different but equivalent operation orders


def two_layer_net(inputs, reuse=None):
    """A small slim network with fixed initial values, so every graph starts from the same weights."""
    with tf1.variable_scope("net", reuse=reuse):
        hidden = slim.fully_connected(
            inputs, 4, activation_fn=tf.tanh, weights_initializer=tf.constant_initializer(HIDDEN_W), scope="hidden"
        )
        return slim.fully_connected(
            hidden, 2, activation_fn=None, weights_initializer=tf.constant_initializer(OUTPUT_W), scope="logits"
        )


def train_with_slim(loss_scale, steps=3, **create_train_op_kwargs):
    """Train ``two_layer_net`` through ``slim.learning.create_train_op``.

    ``loss_scale=None`` is the float32 reference. Returns (variables by name,
    the gradient-norm summaries of the first step).
    """
    with tf.Graph().as_default():
        predictions = two_layer_net(tf.constant(INPUTS))
        tf1.losses.mean_squared_error(LABELS, predictions)
        optimizer = tf1.train.MomentumOptimizer(0.01, 0.9)
        if loss_scale is not None:
            optimizer = LossScaleOptimizer(optimizer, FixedLossScaleManager(loss_scale))
        if "gradient_multipliers" in create_train_op_kwargs:
            create_train_op_kwargs["gradient_multipliers"] = {
                tf1.trainable_variables()[0]: create_train_op_kwargs["gradient_multipliers"]
            }
        train_op = slim.learning.create_train_op(tf1.losses.get_total_loss(), optimizer, **create_train_op_kwargs)
        summaries = tf1.summary.merge_all()
        if summaries is None:  # the float32 reference without summarize_gradients has none
            summaries = tf.constant(b"")
        with tf1.Session() as sess:
            sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            _, first_summary = sess.run([train_op, summaries])
            for _ in range(steps - 1):
                sess.run(train_op)
            state = {v.op.name: sess.run(v) for v in tf1.trainable_variables()}
    norms = {
        v.tag: v.simple_value for v in tf1.Summary.FromString(first_summary).value if v.tag.endswith("gradient_norm")
    }
    return state, norms


def assert_close_states(reference, actual):
    """Same variable names, values within RTOL."""
    assert reference.keys() == actual.keys()
    for name, value in reference.items():
        np.testing.assert_allclose(actual[name], value, rtol=RTOL, atol=1e-7, err_msg=name)


def test_clip_gradient_norm_acts_on_unscaled_gradients():
    reference, _ = train_with_slim(None, clip_gradient_norm=0.5)
    scaled, _ = train_with_slim(SCALE, clip_gradient_norm=0.5)
    unclipped, _ = train_with_slim(None)
    assert_close_states(reference, scaled)
    assert not np.allclose(reference["net/hidden/weights"], unclipped["net/hidden/weights"])  # clipping bit


def test_gradient_multipliers_act_on_unscaled_gradients():
    reference, _ = train_with_slim(None, gradient_multipliers=0.25)
    scaled, _ = train_with_slim(SCALE, gradient_multipliers=0.25)
    assert_close_states(reference, scaled)


def test_summarize_gradients_reports_unscaled_norms():
    _, reference = train_with_slim(None, steps=1, summarize_gradients=True)
    _, scaled = train_with_slim(SCALE, steps=1, summarize_gradients=True)
    assert len(reference) == 4 and reference.keys() == scaled.keys()
    for tag, norm in reference.items():
        assert scaled[tag] == pytest.approx(norm, rel=RTOL), tag


def test_loss_check_does_not_abort_a_skipped_fp16_overflow_step():
    """The fp16 loss is finite, but its scaled gradient overflows fp16 twice before the scale is small enough."""

    def run(loss_scale):
        with tf.Graph().as_default():
            w = tf1.get_variable("w", initializer=[1.0, 2.0])
            loss = tf.cast(tf.reduce_sum(tf.cast(w, tf.float16) * tf.constant(4.0, tf.float16)), tf.float32)
            optimizer = tf1.train.GradientDescentOptimizer(0.1)
            if loss_scale is not None:
                manager = ExponentialUpdateLossScaleManager(loss_scale, 1000, decr_every_n_nan_or_inf=1, decr_ratio=0.5)
                optimizer = LossScaleOptimizer(optimizer, manager)
            train_op = slim.learning.create_train_op(loss, optimizer, check_numerics=True)
            with tf1.Session() as sess:
                sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
                for _ in range(1 if loss_scale is None else 3):
                    sess.run(train_op)  # would raise InvalidArgumentError if slim's check fired
                scale = None if loss_scale is None else sess.run(optimizer.loss_scale)
                return sess.run(w), scale

    reference, _ = run(None)
    # 2**15 * 4 and 2**14 * 4 overflow fp16 (max 65504); 2**13 * 4 does not: two skips, one update.
    scaled, final_scale = run(2.0**15)
    assert final_scale == 2.0**13
    np.testing.assert_array_equal(scaled, reference)


def train_clones(loss_scale, batches, num_clones=2):
    """The clone pattern: per-clone compute_gradients on a batch slice, summed gradients, one apply_gradients."""
    with tf.Graph().as_default():
        inputs = tf1.placeholder(tf.float32, INPUTS.shape)
        optimizer = tf1.train.MomentumOptimizer(0.01, 0.9)
        if loss_scale is not None:
            optimizer = LossScaleOptimizer(optimizer, FixedLossScaleManager(loss_scale))
        per_clone = []
        for clone, (clone_inputs, clone_labels) in enumerate(
            zip(tf.split(inputs, num_clones), np.split(LABELS, num_clones))
        ):
            with tf1.name_scope(f"clone_{clone}"):
                predictions = two_layer_net(clone_inputs, reuse=clone > 0)
                clone_loss = tf1.losses.mean_squared_error(clone_labels, predictions) / num_clones
                per_clone.append(optimizer.compute_gradients(clone_loss))
        summed = [
            (tf.add_n([grads[i][0] for grads in per_clone]), per_clone[0][i][1]) for i in range(len(per_clone[0]))
        ]
        global_step = tf1.train.get_or_create_global_step()
        return train_on_batches(optimizer.apply_gradients(summed, global_step=global_step), inputs, batches)


def test_clone_pattern_matches_float32_reference():
    batches = [INPUTS, INPUTS * 0.5, -INPUTS]
    assert_close_states(train_clones(None, batches), train_clones(SCALE, batches))


def test_clone_pattern_skips_when_one_clone_overflows():
    poisoned = INPUTS.copy()
    poisoned[-1, 0] = np.inf  # only the second clone sees it
    before = train_clones(SCALE, [INPUTS])
    after = train_clones(SCALE, [INPUTS, poisoned])
    assert after["global_step"] == 1
    assert_close_states(before, after)
