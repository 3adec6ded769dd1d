"""``train_step``: the step function a user passes to ``slim.learning.train(..., train_step_fn=slim_mp.train_step)``.

It keeps tf_slim's contract (``(sess, train_op, global_step, train_step_kwargs) -> (loss, should_stop)``,
honouring ``should_stop`` and ``should_log``) and adds what our loop gives, from the graph alone:

- after a step skipped for non-finite gradients (``enable_mixed_precision(..., debug_nonfinite=True)``),
  a WARNING naming the op that made the first inf/NaN;
- progress lines ``step= loss= loss_scale= skipped= images/s=`` instead of slim's ``global step`` line;
- divergence (the loss-scale guard, the loss check, and without loss scaling a loss that is not
  finite) as a ``TrainingDivergedError`` whose one sentence ends the output, with no save after it;
- the lock ``--train_dir`` takes, on ``logdir`` (at the first step, on the chief): a second process
  in the same train dir stops with one error (``train_dir_guard``);
- SIGTERM: the running step finishes, then ``should_stop`` is returned, so ``slim.learning.train``
  saves ``model.ckpt-<current step>`` with its final save; then the process exits with status 143,
  as our script does.

It also works as the step of a plain ``Session`` loop: ``loss, stop = slim_mp.train_step(sess, train_op,
global_step, {})``.
"""

from typing import Any, Dict, Tuple

import tensorflow as tf
from absl import logging

from slim_mp.seams.official_loops import running_loop
from slim_mp.seams.step_watch import step_watch
from slim_mp.seams.train_dir_guard import guard_train_dir

_STOP_FLAGS = ("should_log", "should_stop")


def train_step(sess: tf.compat.v1.Session, train_op: tf.Tensor, global_step: tf.Tensor,
               train_step_kwargs: Dict[str, Any]) -> Tuple[float, bool]:
    """Run one train step as ``slim.learning.train_step`` does, plus diagnosis, progress, divergence and SIGTERM.

    Args:
      sess: the session (slim's Supervisor session, or any ``tf.compat.v1.Session``).
      train_op: the train op of ``slim.learning.create_train_op`` (its value is the total loss).
      global_step: the global step tensor.
      train_step_kwargs: slim's dictionary; its ``should_stop`` and ``should_log`` tensors are run
        after the step (``logdir`` and ``summary_writer`` serve only traces, which it does not write).

    Returns:
      The step's total loss and whether training should stop (``should_stop``, or a SIGTERM arrived).

    Raises:
      TrainingDivergedError: the loss-scale guard or a loss check fired (the message is one sentence
        naming the step, and with ``debug_nonfinite`` the op that made the first inf/NaN).
      TrainDirInUseError: another process holds the lock on ``logdir``.
      ValueError: ``train_step_kwargs`` asks for traces (``trace_every_n_steps`` of ``slim.learning.train``).
    """
    if "should_trace" in train_step_kwargs:
        raise ValueError("train_step_fn=slim_mp.train_step writes no traces; drop trace_every_n_steps from "
                         "slim.learning.train, or profile with slim's own train_step.")
    watch = step_watch(sess.graph, global_step)
    if watch.stage.first_step is None:  # the first step of this graph: find slim's loop, lock its train dir
        watch.enter_loop(running_loop())
        guard_train_dir(watch.stage.loop)
    watch.use_session(sess)
    watch.sigterm.install()
    try:
        flags = {key: train_step_kwargs[key] for key in _STOP_FLAGS if key in train_step_kwargs}
        values = watch.step(sess, {"loss": train_op}, read_after=flags)
    except BaseException:
        watch.sigterm.restore()
        raise
    if values.get("should_log", False):
        logging.info("%s", watch.progress_line())
    should_stop = bool(values.get("should_stop", False))
    if should_stop:
        watch.sigterm.restore()
    elif watch.stop_requested("slim.learning.train's final save"):
        should_stop = True
    return float(values["loss"]), should_stop
