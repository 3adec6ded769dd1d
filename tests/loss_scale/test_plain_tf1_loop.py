"""The contrib-style TF1 loop: build the train op, run only global_variables_initializer(), train.

``tf.contrib.mixed_precision`` users never ran ``local_variables_initializer``; slim_mp's loss
scaling must work the same way, and still restore a TF 1.15 contrib checkpoint with a default Saver.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from quadratic import INITIAL_W, build_quadratic, save_contrib_checkpoint

import slim_mp
from slim_mp.loss_scale.managers import (
    ExponentialUpdateLossScaleManager,
    FixedLossScaleManager,
)
from slim_mp.loss_scale.optimizer import LossScaleOptimizer

tf1 = tf.compat.v1

FINITE_ROWS = np.array([[1.0, 2.0, 0.5], [0.3, -1.0, 2.0]], np.float32)
NOT_FINITE = np.array([np.inf, 1.0, np.nan], np.float32)
LEARNING_RATE = 0.1
CONTRIB_KEYS = {"w", "loss_scale", "good_steps", "bad_steps"}


def numpy_sgd(rows):
    """Plain float32 SGD on loss = sum((w*x - 1)^2), one step per row: the reference."""
    w = INITIAL_W.copy()
    for x in rows:
        w = w - np.float32(LEARNING_RATE) * 2.0 * (w * x - 1.0) * x
    return w


MANAGERS = {
    "fixed": lambda: FixedLossScaleManager(128),
    "exponential": lambda: ExponentialUpdateLossScaleManager(256, incr_every_n_steps=1000),
}


@pytest.mark.parametrize("manager_name", sorted(MANAGERS))
@pytest.mark.parametrize("use_create_train_op", [False, True])
def test_global_initializer_alone_trains_and_counts_skips(manager_name, use_create_train_op):
    with tf.Graph().as_default():
        w, x, loss = build_quadratic()
        optimizer = LossScaleOptimizer(tf1.train.GradientDescentOptimizer(LEARNING_RATE), MANAGERS[manager_name]())
        if use_create_train_op:
            train_op = slim.learning.create_train_op(loss, optimizer, check_numerics=False)  # NaN row below
        else:
            train_op = optimizer.minimize(loss)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            assert sess.run(optimizer.skipped_steps) == 0  # readable before the first step
            for row in (FINITE_ROWS[0], NOT_FINITE, FINITE_ROWS[1]):
                sess.run(train_op, {x: row})
            skipped, trained = sess.run([optimizer.skipped_steps, w])
    assert skipped == 1
    np.testing.assert_allclose(trained, numpy_sgd(FINITE_ROWS), rtol=1e-6)


def numpy_sgd_linear(rows):
    """Plain float32 SGD on loss = (x.w - 1)^2, one step per row: the reference for the MatMul model."""
    w = INITIAL_W.copy()
    for x in rows:
        w = w - np.float32(LEARNING_RATE) * 2.0 * (np.dot(x, w) - 1.0) * x
    return w


def test_enable_mixed_precision_float16_with_global_initializer_alone():
    with tf.Graph().as_default():
        w = tf1.get_variable("w", initializer=INITIAL_W)
        x = tf1.placeholder(tf.float32, [3], name="x")
        loss = tf.reduce_sum(tf.square(tf.matmul(x[tf.newaxis, :], w[:, tf.newaxis]) - 1.0))
        optimizer = slim_mp.enable_mixed_precision(
            tf1.train.GradientDescentOptimizer(LEARNING_RATE), "float16", loss_scale=128)
        train_op = slim.learning.create_train_op(loss, optimizer, check_numerics=False)
        ops = tf1.get_default_graph().get_operations()
        assert any(op.type == "MatMul" and op.outputs[0].dtype == tf.float16 for op in ops)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for row in (FINITE_ROWS[0], NOT_FINITE, FINITE_ROWS[1]):
                sess.run(train_op, {x: row})
            skipped, trained = sess.run([optimizer.skipped_steps, w])
    assert skipped == 1
    # float16 products: within 1e-2 of the float32 reference.
    np.testing.assert_allclose(trained, numpy_sgd_linear(FINITE_ROWS), atol=1e-2)


def test_contrib_checkpoint_restores_and_trains_without_any_initializer(tmp_path):
    contrib = str(tmp_path / "contrib.ckpt")
    save_contrib_checkpoint(contrib, INITIAL_W, bad_steps=0)
    with tf.Graph().as_default():
        w, x, loss = build_quadratic()
        manager = ExponentialUpdateLossScaleManager(8, incr_every_n_steps=2)
        optimizer = LossScaleOptimizer(tf1.train.GradientDescentOptimizer(LEARNING_RATE), manager)
        train_op = optimizer.minimize(loss)
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            saver.restore(sess, contrib)
            sess.run(train_op, {x: FINITE_ROWS[0]})  # good_steps was 1: this finite step doubles 512
            assert sess.run([optimizer.loss_scale, optimizer.skipped_steps]) == [1024, 0]
            np.testing.assert_allclose(sess.run(w), numpy_sgd(FINITE_ROWS[:1]), rtol=1e-6)
            resaved = saver.save(sess, str(tmp_path / "resaved.ckpt"))
    assert set(tf.train.load_checkpoint(resaved).get_variable_to_shape_map()) == CONTRIB_KEYS
