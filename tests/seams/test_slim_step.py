"""``slim.learning.train(train_step_fn=slim_mp.train_step)`` and the step function in a plain ``Session`` loop.

The model (``tiny_model``) diverges in known ways. ``slim.learning.train`` runs here with
``logdir=None`` (no checkpoints, no summaries): its Supervisor's service threads read the global step
outside any graph, which works only with eager execution disabled, a process-wide switch.
tests/compat/test_user_seams_script.py runs the official-style script, with a train_dir and slim's
defaults, in a process of its own.
"""

import re
import signal

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

import slim_mp
import tiny_model
from tiny_model import BATCH, CLASSES, FEATURES, UNWATCHED, one_sentence

tf1 = tf.compat.v1

FLOAT16_MAX = 65504.0


def test_slim_train_with_the_step_function_names_the_first_nonfinite_op_of_a_diverged_run(logged):
    with tf.Graph().as_default():
        train_op, _ = tiny_model.build(learning_rate=1e8, loss_scale=1.0)
        with pytest.raises(slim_mp.TrainingDivergedError) as raised:
            slim.learning.train(train_op, None, number_of_steps=20, log_every_n_steps=1,
                                train_step_fn=slim_mp.train_step)
    message = one_sentence(raised.value)
    assert message.startswith("The loss is inf or NaN") and "(at step 2)" in message
    origin = re.search(r"from op '([^']+)' \((\w+), (\w+) pass, low precision \((\w+)\)\)", message)
    assert origin, message
    op_name, op_type, direction, dtype = origin.groups()
    assert op_name.startswith("fc1/") and op_type == "Cast" and direction == "forward" and dtype == "float16"
    assert raised.value.step == 2 and raised.value.divergence.diagnosis is not None
    assert not [line for line in logged if UNWATCHED in line]


def test_the_fp32_reference_of_that_run_leaves_fc1_beyond_float16_after_one_step():
    """What the test above relies on, in float32 alone: one step at 1e8 puts fc1 out of float16's range."""
    with tf.Graph().as_default():
        images = tf.ones([BATCH, FEATURES])
        hidden = slim.fully_connected(images, 16, scope="fc1")
        logits = slim.fully_connected(hidden, CLASSES, activation_fn=None, scope="fc2")
        loss = tf1.losses.sparse_softmax_cross_entropy(tf.zeros([BATCH], tf.int64), logits)
        step = tf1.train.GradientDescentOptimizer(1e8).minimize(loss)
        fc1 = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "fc1")
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            session.run(step)
            assert max(float(np.max(np.abs(value))) for value in session.run(fc1)) > FLOAT16_MAX


def test_slim_train_progress_shows_loss_scale_and_skipped_steps_until_the_guard(logged):
    with tf.Graph().as_default():
        train_op, _ = tiny_model.build(learning_rate=0.01, loss_scale=1e30, skips=3)
        with pytest.raises(slim_mp.TrainingDivergedError) as raised:
            slim.learning.train(train_op, None, number_of_steps=20, log_every_n_steps=1,
                                train_step_fn=slim_mp.train_step)
    message = one_sentence(raised.value)
    assert message.startswith("Training diverged") and "backward pass, low precision (float16)" in message
    progress = [line for line in logged if line.startswith("step=")]
    # Skipped steps leave the global step at 0; the third skip in a row fails its own run (the guard).
    assert [re.sub(r"loss=\S+ ", "", re.sub(r"images/s=\d+", "images/s=N", line)) for line in progress] == [
        f"step=0 loss_scale=1e+30 skipped={count} images/s=N" for count in (1, 2)]
    skipped = [line for line in logged if "was skipped for non-finite gradients" in line]
    assert len(skipped) == 2 and all("backward pass, low precision (float16)" in line for line in skipped)


def test_slim_train_progress_lines_of_a_healthy_run(logged):
    before = signal.getsignal(signal.SIGTERM)
    with tf.Graph().as_default():
        train_op, _ = tiny_model.build(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
        loss = slim.learning.train(train_op, None, number_of_steps=6, log_every_n_steps=2,
                                   train_step_fn=slim_mp.train_step)
    progress = [line for line in logged if line.startswith("step=")]
    assert [line.split()[0] for line in progress] == ["step=2", "step=4", "step=6"]
    for line in progress:
        assert re.fullmatch(r"step=\d+ loss=\S+ loss_scale=128 skipped=0 images/s=\d+", line), line
    assert np.isfinite(loss)
    assert signal.getsignal(signal.SIGTERM) is before  # given back once should_stop ended the run


def test_a_plain_session_loop_with_the_step_function_is_not_warned(logged):
    with tf.Graph().as_default():
        train_op, global_step = tiny_model.build(learning_rate=0.01, loss_scale=128.0)
        with tf1.Session() as session:
            session.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            stops = [slim_mp.train_step(session, train_op, global_step, {})[1] for _ in range(3)]
            assert session.run(global_step) == 3
    assert stops == [False, False, False]
    assert not [line for line in logged if UNWATCHED in line]


def test_a_request_for_traces_is_an_error_naming_the_argument():
    with tf.Graph().as_default():
        train_op, global_step = tiny_model.build(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
        with tf1.Session() as session:
            with pytest.raises(ValueError, match="drop trace_every_n_steps from slim.learning.train"):
                slim_mp.train_step(session, train_op, global_step, {"should_trace": tf.constant(True)})


def test_a_float32_loss_that_is_not_finite_stops_slim_train_with_the_loss_sentence():
    with tf.Graph().as_default():
        train_op, _ = tiny_model.build_float32_with_nan_batch(3)
        with pytest.raises(slim_mp.TrainingDivergedError) as raised:
            slim.learning.train(train_op, None, number_of_steps=20, train_step_fn=slim_mp.train_step)
    assert one_sentence(raised.value) == (
        "The loss is inf or NaN; lower the optimizer's learning rate or check the input data (at step 3).")
