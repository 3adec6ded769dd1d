"""A user's own loop with our seams: ``slim.learning.train(train_step_fn=slim_mp.train_step)``,
``MonitoredTrainingSession(hooks=[slim_mp.TrainStepHook(...)])`` and a plain ``Session`` loop.

The model is two float16 dense layers over a ``tf.data`` batch of ones (tiny: float16 is emulated
on a CPU). Two ways to diverge, each known by construction:

- a learning rate of 1e8: the first step's update leaves fc1's float32 variables far beyond
  float16's 65504, so the next step's first non-finite value is fc1's cast of a variable to float16
  (forward pass), and tf_slim's loss check fails that step;
- a fixed loss scale of 1e30: the loss stays finite, but the scaled gradients overflow in float16
  (backward pass) on every step, every step is skipped, and the loss-scale guard stops the run.

``slim.learning.train`` runs here with ``logdir=None`` (no checkpoints, no summaries): its
Supervisor's service threads read the global step outside any graph, which works only with eager
execution disabled, a process-wide switch. tests/compat/test_user_seams_script.py runs the
official-style script, with a train_dir and slim's defaults, in a process of its own.
"""

import os
import re
import signal
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from absl import logging as absl_logging

import slim_mp

tf1 = tf.compat.v1

BATCH, FEATURES, CLASSES = 4, 8, 3
FLOAT16_MAX = 65504.0
UNWATCHED = "nothing in this training loop runs them"


@pytest.fixture
def logged(monkeypatch):
    """Every absl INFO and WARNING message, formatted, in order."""
    lines = []
    monkeypatch.setattr(absl_logging, "info", lambda message, *args, **kw: lines.append(message % args))
    monkeypatch.setattr(absl_logging, "warning", lambda message, *args, **kw: lines.append(message % args))
    return lines


@pytest.fixture(autouse=True)
def restore_excepthook_and_sigterm(monkeypatch):
    """The seams install an excepthook for divergence and a SIGTERM handler: undo both after each test."""
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


def _model(learning_rate: float, loss_scale, debug_nonfinite: bool = True, skips: int = 3):
    """(train_op, global_step) of the tiny float16 model, trained by gradient descent at ``learning_rate``."""
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


def _one_sentence(error: Exception) -> str:
    message = str(error)
    assert "\n" not in message and "node" not in message.lower() and "Traceback" not in message
    return message


def test_slim_train_with_the_step_function_names_the_first_nonfinite_op_of_a_diverged_run(logged):
    with tf.Graph().as_default():
        train_op, _ = _model(learning_rate=1e8, loss_scale=1.0)
        with pytest.raises(slim_mp.TrainingDivergedError) as raised:
            slim.learning.train(train_op, None, number_of_steps=20, log_every_n_steps=1,
                                train_step_fn=slim_mp.train_step)
    message = _one_sentence(raised.value)
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
        train_op, _ = _model(learning_rate=0.01, loss_scale=1e30, skips=3)
        with pytest.raises(slim_mp.TrainingDivergedError) as raised:
            slim.learning.train(train_op, None, number_of_steps=20, log_every_n_steps=1,
                                train_step_fn=slim_mp.train_step)
    message = _one_sentence(raised.value)
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
        train_op, _ = _model(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
        loss = slim.learning.train(train_op, None, number_of_steps=6, log_every_n_steps=2,
                                   train_step_fn=slim_mp.train_step)
    progress = [line for line in logged if line.startswith("step=")]
    assert [line.split()[0] for line in progress] == ["step=2", "step=4", "step=6"]
    for line in progress:
        assert re.fullmatch(r"step=\d+ loss=\S+ loss_scale=128 skipped=0 images/s=\d+", line), line
    assert np.isfinite(loss)
    assert signal.getsignal(signal.SIGTERM) is before  # given back once should_stop ended the run


def test_monitored_training_session_hook_names_the_op_and_raises_one_sentence(tmp_path, logged):
    with tf.Graph().as_default():
        train_op, _ = _model(learning_rate=0.01, loss_scale=1e30, skips=3)
        hook = slim_mp.TrainStepHook(loss=train_op, log_every_n_steps=1)
        with pytest.raises(slim_mp.TrainingDivergedError) as raised:
            with tf1.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), hooks=[hook],
                                                    save_summaries_secs=None) as session, \
                    slim_mp.reporting_divergence():
                while not session.should_stop():
                    session.run(train_op)
    message = _one_sentence(raised.value)
    assert message.startswith("Training diverged") and "backward pass, low precision (float16)" in message
    assert raised.value.step == 1
    assert [line for line in logged if line.startswith("step=")][-1].startswith("step=0 loss=")
    assert "loss_scale=1e+30 skipped=2" in [line for line in logged if line.startswith("step=")][-1]
    assert not [line for line in logged if UNWATCHED in line]


def test_monitored_training_session_loss_check_is_replayed_inside_the_block(tmp_path, logged):
    with tf.Graph().as_default():
        train_op, _ = _model(learning_rate=1e8, loss_scale=1.0)
        with pytest.raises(slim_mp.TrainingDivergedError) as raised:
            with tf1.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_summaries_secs=None,
                                                    hooks=[slim_mp.TrainStepHook(train_op)]) as session, \
                    slim_mp.reporting_divergence():
                while not session.should_stop():
                    session.run(train_op)
    message = _one_sentence(raised.value)
    assert message.startswith("The loss is inf or NaN") and "(at step 2)" in message
    assert re.search(r"from op 'fc1/[^']+' \(Cast, forward pass, low precision \(float16\)\)", message), message


class _SigtermAtStep(tf1.train.SessionRunHook):
    """Sends this process SIGTERM once the global step reaches ``step`` (what a preemption does)."""

    def __init__(self, step: int) -> None:
        self._step = step
        self._sent = False

    def begin(self) -> None:
        self._global_step = tf1.train.get_global_step()

    def after_run(self, run_context, run_values) -> None:
        if not self._sent and run_context.session.run(self._global_step) >= self._step:
            self._sent = True
            os.kill(os.getpid(), signal.SIGTERM)


def test_sigterm_in_monitored_training_session_saves_the_current_step(tmp_path, logged):
    before = signal.getsignal(signal.SIGTERM)
    with tf.Graph().as_default():
        train_op, _ = _model(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
        with tf1.train.MonitoredTrainingSession(
                checkpoint_dir=str(tmp_path), save_summaries_secs=None, save_checkpoint_secs=3600,
                hooks=[slim_mp.TrainStepHook(train_op), _SigtermAtStep(5),
                       tf1.train.StopAtStepHook(last_step=200)]) as session:
            while not session.should_stop():
                session.run(train_op)
    saved = int(tf1.train.latest_checkpoint(str(tmp_path)).rsplit("-", 1)[1])
    (terminated,) = [line for line in logged if line.startswith("terminated by SIGTERM")]
    assert 5 <= saved < 200
    assert terminated.startswith(f"terminated by SIGTERM at step {saved};")
    assert signal.getsignal(signal.SIGTERM) is before  # the hook's end() gave the signal back


def test_debug_nonfinite_without_a_seam_warns_once_naming_the_seams(logged):
    with tf.Graph().as_default():
        train_op, _ = _model(learning_rate=0.01, loss_scale=128.0)
        with tf1.Session() as session:
            session.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            for _ in range(3):
                session.run(train_op)
    (warning,) = [line for line in logged if UNWATCHED in line]
    assert "train_step_fn=slim_mp.train_step" in warning and "slim_mp.TrainStepHook" in warning


def test_a_plain_session_loop_with_the_step_function_is_not_warned(logged):
    with tf.Graph().as_default():
        train_op, global_step = _model(learning_rate=0.01, loss_scale=128.0)
        with tf1.Session() as session:
            session.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            stops = [slim_mp.train_step(session, train_op, global_step, {})[1] for _ in range(3)]
            assert session.run(global_step) == 3
    assert stops == [False, False, False]
    assert not [line for line in logged if UNWATCHED in line]


def test_without_debug_nonfinite_the_train_step_runs_no_python():
    with tf.Graph().as_default():
        _model(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
        kinds = {op.type for op in tf1.get_default_graph().get_operations()}
    assert not kinds & {"PyFunc", "PyFuncStateless", "EagerPyFunc"}


def test_a_request_for_traces_is_an_error_naming_the_argument():
    with tf.Graph().as_default():
        train_op, global_step = _model(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
        with tf1.Session() as session:
            with pytest.raises(ValueError, match="drop trace_every_n_steps from slim.learning.train"):
                slim_mp.train_step(session, train_op, global_step, {"should_trace": tf.constant(True)})
