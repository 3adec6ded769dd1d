"""The seams' tests' model: two float16 dense layers that diverge in known ways, and a one-sentence check.

The model is two float16 dense layers over a ``tf.data`` batch of ones (tiny: float16 is emulated
on a CPU). Two ways to diverge, each known by construction:

- a learning rate of 1e8: the first step's update leaves fc1's float32 variables far beyond
  float16's 65504, so the next step's first non-finite value is fc1's cast of a variable to float16
  (forward pass), and tf_slim's loss check fails that step (``test_slim_step`` checks the premise in
  float32 alone);
- a fixed loss scale of 1e30: the loss stays finite, but the scaled gradients overflow in float16
  (backward pass) on every step, every step is skipped, and the loss-scale guard stops the run.
"""

import numpy as np
import tensorflow as tf
import tf_slim as slim

import slim_mp

tf1 = tf.compat.v1

BATCH, FEATURES, CLASSES = 4, 8, 3
UNWATCHED = "nothing in this training loop runs them"


def build(learning_rate: float, loss_scale, debug_nonfinite: bool = True, skips: int = 3):
    """(train_op, global_step) of the tiny float16 model in the default graph, trained by gradient descent."""
    global_step = tf1.train.get_or_create_global_step()
    data = tf.data.Dataset.from_tensor_slices(
        (np.ones([64, FEATURES], np.float32), np.zeros([64], np.int64))).repeat().batch(BATCH, drop_remainder=True)
    images, labels = tf1.data.make_one_shot_iterator(data).get_next()
    hidden = slim.fully_connected(images, 16, scope="fc1")
    logits = slim.fully_connected(hidden, CLASSES, activation_fn=None, scope="fc2")
    tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    optimizer = slim_mp.enable_mixed_precision(
        tf1.train.GradientDescentOptimizer(learning_rate), "float16", loss_scale=loss_scale,
        max_consecutive_skips_at_min=skips, debug_nonfinite=debug_nonfinite)
    train_op = slim.learning.create_train_op(tf1.losses.get_total_loss(), optimizer, global_step=global_step)
    return train_op, global_step


def one_sentence(error: Exception) -> str:
    """The message of ``error``, checked to be one sentence: one line, no node dump, no traceback."""
    message = str(error)
    assert "\n" not in message and "node" not in message.lower() and "Traceback" not in message
    return message


def build_float32_with_nan_batch(nan_batch: int):
    """(train_op, global_step) of a float32 linear model whose ``nan_batch``-th batch (1-based) holds a NaN feature.

    The train op is the official script's (the loss after the update, nothing checks it) and nothing
    wraps the optimizer, so nothing skips the step: the NaN reaches the loss and the weights.
    """
    global_step = tf1.train.get_or_create_global_step()
    features = np.ones([64 * BATCH, FEATURES], np.float32)
    features[(nan_batch - 1) * BATCH, 0] = np.nan
    data = tf.data.Dataset.from_tensor_slices((features, np.zeros([64 * BATCH], np.int64))).batch(BATCH)
    images, labels = tf1.data.make_one_shot_iterator(data).get_next()
    logits = slim.fully_connected(images, CLASSES, activation_fn=None, scope="linear")
    loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    update = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    with tf.control_dependencies([update]):
        return tf.identity(loss), global_step
