"""``TrainStepHook`` for ``MonitoredTrainingSession(hooks=[...])``, and ``reporting_divergence`` around it.

The hook gives a ``MonitoredTrainingSession`` loop what ``slim_mp.train_step`` gives ``slim.learning.train``
(the same ``StepWatch``): the non-finite diagnosis of a skipped step, progress lines with loss scale,
skipped steps and images/s, a stop without a save for a loss that is not finite (without loss
scaling), the lock on ``checkpoint_dir`` (taken when the session is built, on the chief), and
after SIGTERM a stop request, so that the session's ``CheckpointSaverHook`` saves the current step
in its ``end()``, after which the hook's ``end()`` ends the process with status 143. It treats
every ``run`` of the monitored session as a train step (the probes' batch is read before each).

A hook never sees the error of a failing run, so divergence is turned into a ``TrainingDivergedError``
by ``reporting_divergence()``, a context manager entered right after the session (inside its ``with``).
"""

import contextlib
from typing import Iterator, Optional

import tensorflow as tf
from absl import logging

from slim_mp.seams.official_loops import running_loop
from slim_mp.seams.preemption import TerminatedAfterSave
from slim_mp.seams.step_watch import StepWatch, existing_step_watch, step_watch
from slim_mp.seams.train_dir_guard import guard_train_dir

tf1 = tf.compat.v1


class TrainStepHook(tf1.train.SessionRunHook):
    """Diagnosis, progress and the SIGTERM stop for every step of a ``MonitoredTrainingSession``.

    Args:
      loss: the loss to show in progress lines (e.g. the train op of ``slim.learning.create_train_op``),
        or None to leave it out.
      log_every_n_steps: a progress line whenever the global step is a multiple of it.

    Raises:
      ValueError: if ``log_every_n_steps`` is not a positive integer, or (when the session starts)
        the graph has no global step.
      TrainDirInUseError: (when the session starts) another process holds the lock on ``checkpoint_dir``.
    """

    def __init__(self, loss: Optional[tf.Tensor] = None, log_every_n_steps: int = 100) -> None:
        if isinstance(log_every_n_steps, bool) or not isinstance(log_every_n_steps, int) or log_every_n_steps < 1:
            raise ValueError(f"log_every_n_steps must be a positive integer, got {log_every_n_steps!r}.")
        self._loss = loss
        self._every = log_every_n_steps
        self._watch: Optional[StepWatch] = None
        self._global_step: Optional[tf.Tensor] = None

    def begin(self) -> None:
        self._global_step = tf1.train.get_global_step()
        if self._global_step is None:
            raise ValueError("TrainStepHook needs a global step; create it with "
                             "tf.compat.v1.train.get_or_create_global_step() before MonitoredTrainingSession.")
        self._watch = step_watch(tf1.get_default_graph(), self._global_step)
        self._watch.enter_loop(running_loop())
        guard_train_dir(self._watch.stage.loop)

    def after_create_session(self, session: tf1.Session, coord: tf1.train.Coordinator) -> None:
        del coord
        self._watch.use_session(session)
        self._watch.sigterm.install()

    def before_run(self, run_context: tf1.train.SessionRunContext) -> tf1.train.SessionRunArgs:
        feed = self._watch.capture(run_context.session)
        return tf1.train.SessionRunArgs(self._loss, feed_dict=feed or None)

    def after_run(self, run_context: tf1.train.SessionRunContext, run_values: tf1.train.SessionRunValues) -> None:
        values = {} if self._loss is None else {"loss": float(run_values.results)}
        self._watch.after_step(run_context.session, values)
        if self._watch.stage.last_step % self._every == 0:
            logging.info("%s", self._watch.progress_line())
        if self._watch.stop_requested("the CheckpointSaverHook"):
            run_context.request_stop()

    def end(self, session: tf1.Session) -> None:
        """Give SIGTERM back; after a SIGTERM stop, end the process (status 143) once the session's final save ran.

        ``MonitoredTrainingSession`` runs the ``end()`` of the hooks passed to it after its own
        ``CheckpointSaverHook``'s.
        """
        del session
        self._watch.sigterm.restore()
        if self._watch.stage.terminated:
            raise TerminatedAfterSave()


def _raise_if_diverged(watch: StepWatch, error: tf.errors.OpError) -> None:
    """``watch.raise_if_diverged``, replaying on the hook's session while it is open (inside the session's block)."""
    try:
        watch.raise_if_diverged(error, watch.stage.session)
    except RuntimeError:  # the session is closed: the block is outside the session's ``with``
        watch.raise_if_diverged(error, None)


@contextlib.contextmanager
def reporting_divergence() -> Iterator[None]:
    """Inside a ``MonitoredTrainingSession`` block: a divergence becomes a ``TrainingDivergedError``.

    Its sentence names the step and, with ``debug_nonfinite``, the op of the first inf/NaN that the
    ``TrainStepHook`` found (a failed loss check is replayed on the still-open session); uncaught,
    it ends the output as one ``error:`` line. It needs the hook (its graph is the default graph
    when the block is entered); any other error passes unchanged.

    Raises:
      TrainingDivergedError: the loss-scale guard fired inside the block.
    """
    graph = tf1.get_default_graph()
    try:
        yield
    except tf.errors.InvalidArgumentError as error:
        watch = existing_step_watch(graph)
        if watch is not None:
            _raise_if_diverged(watch, error)
        raise
    finally:
        watch = existing_step_watch(graph)
        if watch is not None:  # the hook's end() does not run after an error
            watch.sigterm.restore()
