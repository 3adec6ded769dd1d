"""The small quadratic model of the loss-scaling tests, the checkpoint a TF 1.15 contrib run of it leaves,
and the loop that trains a test model one fed batch at a time."""

from typing import Dict, Iterable

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1

INITIAL_W = np.array([0.5, -1.5, 2.0], np.float32)


def build_quadratic():
    """Create ``w`` and a placeholder ``x``; return (w, x, loss) with loss = sum((w*x - 1)^2)."""
    w = tf1.get_variable("w", initializer=INITIAL_W)
    x = tf1.placeholder(tf.float32, [3], name="x")
    return w, x, tf.reduce_sum(tf.square(w * x - 1.0))


def save_contrib_checkpoint(path: str, w: np.ndarray, bad_steps: int) -> None:
    """Write what a TF 1.15 contrib run leaves: ref variables w, loss_scale (512), good_steps (1) and bad_steps."""
    with tf.Graph().as_default():
        tf1.get_variable("w", initializer=w, use_resource=False)
        tf1.Variable(512.0, name="loss_scale", trainable=False, use_resource=False)
        tf1.Variable(1, name="good_steps", trainable=False, use_resource=False)
        tf1.Variable(bad_steps, name="bad_steps", trainable=False, use_resource=False)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            tf1.train.Saver().save(sess, path)


def train_on_batches(train_op: tf.Operation, inputs: tf.Tensor, batches: Iterable[np.ndarray]) -> Dict[str, np.ndarray]:
    """Initialise the default graph's variables, run ``train_op`` once per batch fed to ``inputs``;
    return every global variable's value (model, slots, scale state, global step) by name."""
    with tf1.Session() as sess:
        sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
        for batch in batches:
            sess.run(train_op, {inputs: batch})
        return {v.op.name: sess.run(v) for v in tf1.global_variables()}
