"""``slim_mp.enable_mixed_precision_graph_rewrite`` against TensorFlow's own entry point of that name.

The signature is compared with TensorFlow 2.21's function, and the loss-scale trajectory with
TensorFlow's ``DynamicLossScale`` driven by the same finite/non-finite gradients.
"""

import inspect

import numpy as np
import pytest
import tensorflow as tf

import slim_mp

tf1 = tf.compat.v1
# finite (True) or non-finite (False) gradients, step by step: growth, overflow, regrowth, overflows in a row
FINITE_STEPS = [True, True, True, False, True, True, True, True, False, False, True, True, True]


def test_signature_is_tensorflows():
    ours = inspect.signature(slim_mp.enable_mixed_precision_graph_rewrite).parameters
    theirs = inspect.signature(tf1.mixed_precision.enable_mixed_precision_graph_rewrite).parameters
    positional = [(name, p.default) for name, p in ours.items() if p.kind == p.POSITIONAL_OR_KEYWORD]
    assert positional == [(name, p.default) for name, p in theirs.items()]


def _tensorflow_scales(make_loss_scale) -> list:
    """TensorFlow's own loss-scale values after each step of FINITE_STEPS (its objects hold variables:
    they are made inside the graph)."""
    with tf.Graph().as_default():
        loss_scale = make_loss_scale()
        gradient = tf1.placeholder(tf.float32, [])
        update, _ = loss_scale.update([gradient])
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            scales = []
            for finite in FINITE_STEPS:
                session.run(update, {gradient: 1.0 if finite else np.inf})
                scales.append(float(session.run(loss_scale())))
    return scales


def _our_run(make_loss_scale, precision="bfloat16"):
    """slim_mp's loss-scale values and weights after each step of FINITE_STEPS, on a one-matmul model."""
    with tf.Graph().as_default():
        loss_scale = make_loss_scale()
        x = tf1.placeholder(tf.float32, [2, 4])
        weights = tf1.get_variable("w", [4, 3], initializer=tf1.ones_initializer())
        loss = tf.reduce_sum(tf.matmul(x, weights))
        optimizer = slim_mp.enable_mixed_precision_graph_rewrite(
            tf1.train.GradientDescentOptimizer(0.1), loss_scale, precision=precision)
        train_op = optimizer.minimize(loss)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            scales, weight_sums = [], []
            for finite in FINITE_STEPS:
                session.run(train_op, {x: np.full([2, 4], 1.0 if finite else np.inf, np.float32)})
                scales.append(float(session.run(optimizer.loss_scale)))
                weight_sums.append(float(session.run(weights).sum()))
            return scales, weight_sums, optimizer


@pytest.mark.parametrize("make_loss_scale", [
    lambda: tf1.mixed_precision.DynamicLossScale(initial_loss_scale=8, increment_period=3, multiplier=4),
    lambda: tf1.mixed_precision.DynamicLossScale(initial_loss_scale=2, increment_period=2, multiplier=2),
])
def test_dynamic_loss_scale_follows_tensorflows_trajectory(make_loss_scale):
    expected = _tensorflow_scales(make_loss_scale)
    ours, weight_sums, optimizer = _our_run(make_loss_scale)
    assert ours == expected
    assert optimizer.rewrite_reports and optimizer.rewrite_reports[0].ops_converted > 0
    # a step with non-finite gradients changes no weight; a finite one does
    changes = np.diff([12.0] + weight_sums)
    assert all((change != 0) == finite for change, finite in zip(changes, FINITE_STEPS))


def test_dynamic_string_is_tensorflows_default_dynamic_loss_scale():
    assert _our_run(lambda: "dynamic")[0] == _tensorflow_scales(tf1.mixed_precision.DynamicLossScale)


@pytest.mark.parametrize("make_loss_scale", [lambda: 64, lambda: 64.0, lambda: tf1.mixed_precision.FixedLossScale(64)])
def test_a_fixed_loss_scale_stays_fixed(make_loss_scale):
    scales, _, _ = _our_run(make_loss_scale)
    assert scales == [64.0] * len(FINITE_STEPS)


def test_refuses_what_tensorflows_refuses_with_a_value_error():
    with pytest.raises(ValueError, match="opt must be a tf.compat.v1.train.Optimizer"):
        slim_mp.enable_mixed_precision_graph_rewrite("sgd")
    with tf.Graph().as_default():
        wrapped = slim_mp.enable_mixed_precision_graph_rewrite(tf1.train.GradientDescentOptimizer(0.1))
        with pytest.raises(ValueError, match="already a slim_mp LossScaleOptimizer"):
            slim_mp.enable_mixed_precision_graph_rewrite(wrapped)
        with pytest.raises(ValueError, match="loss_scale=0.5 is not supported"):
            slim_mp.enable_mixed_precision_graph_rewrite(tf1.train.GradientDescentOptimizer(0.1), 0.5)
