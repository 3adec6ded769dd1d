"""tf_slim layers that reach moved TensorFlow names, checked against NumPy.

``slim.batch_norm(is_training=<tensor>)`` and ``slim.dropout`` with a tensor pick their branch with
``control_flow_ops.cond``; ``slim.legacy_fully_connected`` on rank > 2 inputs reshapes with
``array_ops.stack``/``unstack``. Without the compat fixes each raises AttributeError.
"""

import numpy as np
import tensorflow as tf
import tf_slim as slim

EPSILON = 0.001
DECAY = 0.9


def test_batch_norm_with_a_tensor_is_training_switches_between_batch_and_moving_statistics():
    inputs = np.random.default_rng(0).normal(3.0, 2.0, size=(8, 5)).astype(np.float32)
    batch_mean, batch_variance = inputs.mean(axis=0), inputs.var(axis=0)
    with tf.Graph().as_default():
        is_training = tf.compat.v1.placeholder(tf.bool, [])
        outputs = slim.batch_norm(tf.constant(inputs), decay=DECAY, epsilon=EPSILON, is_training=is_training)
        update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            training_outputs, _ = session.run([outputs, update_ops], {is_training: True})
            eval_outputs = session.run(outputs, {is_training: False})
    np.testing.assert_allclose(
        training_outputs, (inputs - batch_mean) / np.sqrt(batch_variance + EPSILON), rtol=1e-4, atol=1e-4)
    # One update from the initial 0 and 1. slim runs 2-D inputs through the fused kernel, which moves
    # the variance towards the unbiased (n / (n - 1)) batch variance.
    count = inputs.shape[0]
    moving_mean = (1 - DECAY) * batch_mean
    moving_variance = DECAY * 1.0 + (1 - DECAY) * batch_variance * count / (count - 1)
    np.testing.assert_allclose(
        eval_outputs, (inputs - moving_mean) / np.sqrt(moving_variance + EPSILON), rtol=1e-4, atol=1e-4)


def test_dropout_with_a_tensor_is_training_is_the_identity_when_false():
    inputs = np.arange(12, dtype=np.float32).reshape(3, 4)
    with tf.Graph().as_default():
        is_training = tf.compat.v1.placeholder(tf.bool, [])
        outputs = slim.dropout(tf.constant(inputs), keep_prob=0.5, is_training=is_training)
        with tf.compat.v1.Session() as session:
            eval_outputs = session.run(outputs, {is_training: False})
            training_outputs = session.run(outputs, {is_training: True})
    np.testing.assert_array_equal(eval_outputs, inputs)
    kept = training_outputs != 0
    np.testing.assert_allclose(training_outputs[kept], 2 * inputs[kept])


def test_legacy_fully_connected_on_a_rank_3_input_matches_numpy():
    rng = np.random.default_rng(1)
    inputs = rng.normal(size=(2, 3, 4)).astype(np.float32)
    weights = rng.normal(size=(4, 5)).astype(np.float32)
    bias = rng.normal(size=(5,)).astype(np.float32)
    with tf.Graph().as_default():
        outputs = slim.legacy_fully_connected(
            tf.constant(inputs), 5, activation_fn=tf.nn.relu,
            weight_init=tf.compat.v1.constant_initializer(weights), bias_init=tf.compat.v1.constant_initializer(bias))
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            values = session.run(outputs)
    assert values.shape == (2, 3, 5)
    np.testing.assert_allclose(values, np.maximum(inputs @ weights + bias, 0), rtol=1e-5, atol=1e-5)
