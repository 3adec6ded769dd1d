"""``MonitoredTrainingSession(hooks=[slim_mp.TrainStepHook(...)])`` with ``slim_mp.reporting_divergence()``.

The model (``tiny_model``) diverges in known ways.
"""

import os
import re
import signal

import pytest
import tensorflow as tf

import slim_mp
import tiny_model
from tiny_model import UNWATCHED, one_sentence

tf1 = tf.compat.v1


def test_monitored_training_session_hook_names_the_op_and_raises_one_sentence(tmp_path, logged):
    with tf.Graph().as_default():
        train_op, _ = tiny_model.build(learning_rate=0.01, loss_scale=1e30, skips=3)
        hook = slim_mp.TrainStepHook(loss=train_op, log_every_n_steps=1)
        with pytest.raises(slim_mp.TrainingDivergedError) as raised:
            with tf1.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), hooks=[hook],
                                                    save_summaries_secs=None) as session, \
                    slim_mp.reporting_divergence():
                while not session.should_stop():
                    session.run(train_op)
    message = one_sentence(raised.value)
    assert message.startswith("Training diverged") and "backward pass, low precision (float16)" in message
    assert raised.value.step == 1
    assert [line for line in logged if line.startswith("step=")][-1].startswith("step=0 loss=")
    assert "loss_scale=1e+30 skipped=2" in [line for line in logged if line.startswith("step=")][-1]
    assert not [line for line in logged if UNWATCHED in line]


def _diverged_in_monitored_session(train_op, checkpoint_dir: str) -> slim_mp.TrainingDivergedError:
    """The error a MonitoredTrainingSession loop with the hook and ``reporting_divergence`` stops with."""
    with pytest.raises(slim_mp.TrainingDivergedError) as raised:
        with tf1.train.MonitoredTrainingSession(checkpoint_dir=checkpoint_dir, save_summaries_secs=None,
                                                hooks=[slim_mp.TrainStepHook(train_op)]) as session, \
                slim_mp.reporting_divergence():
            while not session.should_stop():
                session.run(train_op)
    return raised.value


def test_monitored_training_session_loss_check_is_replayed_inside_the_block(tmp_path, logged):
    with tf.Graph().as_default():
        train_op, _ = tiny_model.build(learning_rate=1e8, loss_scale=1.0)
        error = _diverged_in_monitored_session(train_op, str(tmp_path))
    message = one_sentence(error)
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


def test_sigterm_in_monitored_training_session_saves_the_current_step_then_exits_143(tmp_path, logged):
    before = signal.getsignal(signal.SIGTERM)
    with tf.Graph().as_default():
        train_op, _ = tiny_model.build(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
        with pytest.raises(SystemExit) as exited:
            with tf1.train.MonitoredTrainingSession(
                    checkpoint_dir=str(tmp_path), save_summaries_secs=None, save_checkpoint_secs=3600,
                    hooks=[slim_mp.TrainStepHook(train_op), _SigtermAtStep(5),
                           tf1.train.StopAtStepHook(last_step=200)]) as session:
                while not session.should_stop():
                    session.run(train_op)
    saved = int(tf1.train.latest_checkpoint(str(tmp_path)).rsplit("-", 1)[1])
    (terminated,) = [line for line in logged if line.startswith("terminated by SIGTERM")]
    assert exited.value.code == 143  # our script's status for SIGTERM, once the session's final save is done
    assert 5 <= saved < 200
    assert terminated.startswith(f"terminated by SIGTERM at step {saved};")
    assert signal.getsignal(signal.SIGTERM) is before  # the hook's end() gave the signal back


def test_a_float32_loss_that_is_not_finite_stops_the_session_without_saving_its_weights(tmp_path):
    with tf.Graph().as_default():
        train_op, _ = tiny_model.build_float32_with_nan_batch(3)
        error = _diverged_in_monitored_session(train_op, str(tmp_path))
    assert one_sentence(error) == (
        "The loss is inf or NaN; lower the optimizer's learning rate or check the input data (at step 3).")
    assert tf1.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-0")  # saved at the start; none since
