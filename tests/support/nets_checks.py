"""Shared checks for the network tests: build under an arg_scope, and a forward pass against numpy."""

from typing import Callable

import numpy as np
import tensorflow as tf
import tf_slim as slim

from graph_checks import softmax

SOFTMAX_TOLERANCE = 1e-5

Build = Callable[[tf.Tensor, int], tuple]


def builder(network_fn: Callable, arg_scope: Callable[[], object], **kwargs) -> Build:
    """``build(inputs, num_classes)`` creating ``network_fn`` inside ``arg_scope()``, in training mode."""
    def build(inputs: tf.Tensor, num_classes: int) -> tuple:
        with slim.arg_scope(arg_scope()):
            return network_fn(inputs, num_classes=num_classes, is_training=True, **kwargs)
    return build


def assert_forward_pass_gives_softmax(build: Build, inputs: np.ndarray, num_classes: int) -> None:
    """One forward pass on ``inputs``: finite logits of shape [batch, num_classes], Predictions = softmax."""
    with tf.Graph().as_default():
        logits, end_points = build(tf.constant(inputs, tf.float32), num_classes)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            logits_value, predictions = session.run([logits, end_points["Predictions"]])
    assert logits_value.shape == (inputs.shape[0], num_classes)
    assert np.all(np.isfinite(logits_value))
    np.testing.assert_allclose(predictions, softmax(logits_value), atol=SOFTMAX_TOLERANCE)
