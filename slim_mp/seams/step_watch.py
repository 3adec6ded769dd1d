"""One watched train step, the same for every loop: ours, ``slim_mp.train_step`` and ``TrainStepHook``.

As torch's ``GradScaler`` is one set of verbs every training loop calls, ``StepWatch`` is the one
set of verbs around a train step's ``session.run``, found from the graph alone: the loss-scale and
skipped-steps tensors the optimizer registered, the non-finite probes, the batch size. A loop that
owns its run calls ``step``; the loop around it (its schedule of summaries, logs and saves) stays
the loop's own::

    watch = step_watch(graph, global_step)
    while not done:
        values = watch.step(session, {"loss": train_op})  # capture, run with the diagnosis, after-step
        if int(values["step"]) % 100 == 0:
            print(watch.progress_line())                   # step= loss= loss_scale= skipped= images/s=

``step`` is ``capture`` (the batch, for the probes), ``run`` (a divergence becomes one
``TrainingDivergedError`` sentence with the diagnosis) and ``after_step`` (the progress values, the
replay of a skipped step, throughput). A loop that does not own its run (a ``SessionRunHook``)
calls them one by one, and ``raise_if_diverged`` on the run's error. ``stop_requested`` is the
seams' SIGTERM: they ask their loop to stop so its own final save writes the current step, where our
loop stops in place (``preemption``).

Where the loop stands is one value, ``StepStage`` (frozen), which each verb replaces: the loop a
seam runs in and its raw session (``enter_loop``, ``use_session``), the global step it started from,
the last step's values, the batch of the step being run, and whether SIGTERM stopped it. What reads
it after the fact (``error_lines``, our loop's schedule) takes ``watch.stage`` once and passes it on.

Steps are numbered as our script numbers them: a progress line shows the global step after the step,
a skip warning and the divergence sentence the step being taken (1-based).
"""

import dataclasses
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from slim_mp.loss_scale import NONFINITE_LOSS, TrainingDivergedError, read_divergence
from slim_mp.seams.nonfinite_watch import Feed, NonfiniteWatch
from slim_mp.seams.official_loops import OfficialLoop
from slim_mp.seams.preemption import SigtermStop, TerminatedAfterSave
from slim_mp.seams.progress import Throughput, format_progress, graph_progress_tensors, images_per_step

Fetches = Dict[str, Any]
# The values a progress line shows, in the keys of our loop's progress tensors.
PROGRESS_KEYS = ("step", "loss", "loss_scale", "skipped", "learning_rate")

_WATCHES: "weakref.WeakKeyDictionary[tf.Graph, StepWatch]" = weakref.WeakKeyDictionary()


@dataclasses.dataclass(frozen=True)
class StepStage:
    """Where a watched loop stands; a new value after each verb of ``StepWatch``, never changed in place.

    ``loop`` is the official loop a seam runs in (``official_loops``; None in ours and in a plain
    loop) and ``session`` its raw session (for a later replay), both set by the seams;
    ``first_step`` the global step the loop started from (read at its first step); ``last_values``
    the progress values of the last step; ``feed`` the batch of the step being run; ``terminated``:
    SIGTERM stopped the loop, and the process ends once its final save is done.
    """

    loop: Optional[OfficialLoop] = None
    session: Optional[tf.compat.v1.Session] = None
    first_step: Optional[int] = None
    last_values: Optional[Mapping[str, float]] = None
    feed: Feed = dataclasses.field(default_factory=dict)
    terminated: bool = False

    @property
    def last_step(self) -> Optional[int]:
        """The global step after the last step run, or None before the first."""
        return None if self.last_values is None else int(self.last_values["step"])

    def step_taken(self) -> int:
        """The number of the step being run (1-based): the global step after the last step, plus one.

        Known before the run, whether or not a failing or skipped run advances the global step.
        """
        done = self.first_step if self.last_step is None else self.last_step
        return (done or 0) + 1


@dataclasses.dataclass
class StepWatch:
    """The verbs of one watched train step, found from its graph, and where its loop stands (``stage``).

    ``progress`` are the tensors read after the step when its run did not fetch them (the global
    step, and the loss scale and skipped steps of a loss-scaling optimizer); ``loss_scale`` is the
    scale a divergence sentence names (None without loss scaling).
    """

    nonfinite: NonfiniteWatch
    global_step: tf.Tensor
    progress: Dict[str, tf.Tensor]
    throughput: Optional[Throughput]
    loss_scale: Optional[tf.Tensor] = None
    sigterm: SigtermStop = dataclasses.field(default_factory=SigtermStop)
    _stage: StepStage = dataclasses.field(default_factory=StepStage)

    @property
    def stage(self) -> StepStage:
        """Where the loop stands now (a frozen value: the verbs replace it)."""
        return self._stage

    def _moved(self, **changes: Any) -> None:
        self._stage = dataclasses.replace(self._stage, **changes)

    def enter_loop(self, loop: Optional[OfficialLoop]) -> None:
        """A seam found the official loop it runs in (None: a plain loop)."""
        self._moved(loop=loop)

    def use_session(self, session: tf.compat.v1.Session) -> None:
        """A seam's loop runs its steps on ``session`` (kept for a later replay)."""
        self._moved(session=session)

    def capture(self, session: tf.compat.v1.Session) -> Feed:
        """Read the step's batch for the probes (empty without them); the step runs with it fed."""
        if self._stage.first_step is None:
            self._moved(first_step=int(session.run(self.global_step)))
        self._moved(feed=self.nonfinite.capture(session))
        return self._stage.feed

    def step_taken(self) -> int:
        """The number of the step being run (1-based; ``StepStage.step_taken``)."""
        return self._stage.step_taken()

    def run(self, session: tf.compat.v1.Session, fetches: Fetches) -> Fetches:
        """``session.run(fetches)`` with the captured batch; a failure gets the diagnosis, a divergence is one sentence.

        Raises:
          TrainingDivergedError: the loss check or the loss-scale guard fired.
        """
        try:
            return session.run(fetches, feed_dict=self._stage.feed or None)
        except tf.errors.InvalidArgumentError as error:
            explained = self.raise_if_diverged(error, session)
            if explained is error:
                raise
            raise explained from error

    def after_step(self, session: tf.compat.v1.Session, values: Fetches, read_after: Optional[Fetches] = None
                   ) -> Fetches:
        """``values`` with ``read_after`` and the progress values the step's run did not fetch; replay a skip.

        Read in a run of their own: fetched in the step's run, a read may come before or after the
        step's update. After a skipped step the probes replay it and a WARNING names the first inf/NaN.
        """
        missing = {key: tensor for key, tensor in self.progress.items() if key not in values}
        if missing or read_after:
            values = dict(values, **session.run(dict(read_after or {}, **missing)))
        self.nonfinite.after_step(session, values, self._stage.feed, self.step_taken())
        if self.loss_scale is None and "loss" in values and not np.isfinite(values["loss"]):
            # Without loss scaling nothing skips the step: its update is applied, so no save may follow.
            raise TrainingDivergedError(NONFINITE_LOSS, self.step_taken(), None)
        if self.throughput is not None:
            self.throughput.step_done()
        self._moved(last_values={key: float(values[key]) for key in PROGRESS_KEYS if key in values})
        return values

    def step(self, session: tf.compat.v1.Session, fetches: Fetches, read_after: Optional[Fetches] = None) -> Fetches:
        """One watched train step: ``capture``, ``run`` and ``after_step``; returns every value read."""
        self.capture(session)
        return self.after_step(session, self.run(session, fetches), read_after)

    def progress_line(self) -> str:
        """The progress line of the last step; images/s over the steps since the previous line."""
        values = self._stage.last_values or {}
        skipped = values.get("skipped")
        return format_progress(
            int(values.get("step", 0)), values.get("loss"), values.get("loss_scale"),
            None if skipped is None else int(skipped), values.get("learning_rate"),
            self.throughput.rate() if self.throughput is not None else None,
        )

    def raise_if_diverged(self, error: tf.errors.OpError, session: Optional[tf.compat.v1.Session]
                          ) -> tf.errors.OpError:
        """Raise a failed step's ``error`` as a ``TrainingDivergedError`` if it is one; else return it explained.

        The diagnosis (the origin of the inf/NaN, ``NonfiniteWatch.explain``) is added either way. The
        step is ``step_taken``; with a live ``session`` the scale is read from it, else (a closed
        session) taken from the last step. Uncaught, a ``TrainingDivergedError`` ends the output as
        one ``error:`` line (``error_lines``).
        """
        explained = self.nonfinite.explain(error, session, self._stage.feed)

        def read_loss_scale() -> Optional[float]:
            if self.loss_scale is None or session is None:
                return None if self.loss_scale is None else (self._stage.last_values or {}).get("loss_scale")
            return float(session.run(self.loss_scale))

        diverged = _diverged_error(explained, self.step_taken(), read_loss_scale)
        if diverged is not None:
            raise diverged from error
        return explained

    def diagnose_last_step(self) -> None:
        """Replay the last captured batch on the loop's open session (a no-op without probes or a session).

        For a divergence reported from elsewhere first (a histogram summary failing in another thread):
        its sentence then names where the inf/NaN first appears now, even when no step was replayed yet
        or the last replay was of an earlier, unrelated skip.
        """
        if self._stage.session is not None:
            self.nonfinite.diagnose(self._stage.session, self._stage.feed)

    def stop_requested(self, where: str) -> bool:
        """True once SIGTERM arrived: logs that the loop stops and ``where`` its final save writes the current step.

        slim's Supervisor is asked to end the process (``TerminatedAfterSave``) once that save is done.
        """
        if not self.sigterm.requested:
            return False
        step = self._stage.last_step or 0
        loop = self._stage.loop
        saves = loop is None or loop.writes_checkpoints
        stopping = f"stopping so that {where} saves model.ckpt-{step}" if saves else \
            "stopping (this process saves no checkpoint)"
        logging.warning("terminated by SIGTERM at step %d; %s; rerun the same command to resume", step, stopping)
        self.sigterm.restore()
        self._moved(terminated=True)
        if loop is not None and loop.coordinator is not None:
            loop.coordinator.request_stop((TerminatedAfterSave, TerminatedAfterSave(), None))
        return True


def _diverged_error(error: tf.errors.OpError, step: int,
                    read_loss_scale: Callable[[], Optional[float]]) -> Optional[TrainingDivergedError]:
    """The ``TrainingDivergedError`` of a failed train ``step`` (1-based), or None when ``error`` is no divergence.

    ``read_loss_scale`` gives the loss scale then (None without loss scaling); it is called only for a divergence.
    """
    divergence = read_divergence(error) if isinstance(error, tf.errors.InvalidArgumentError) else None
    return None if divergence is None else TrainingDivergedError(divergence, step, read_loss_scale())


def step_watch(graph: tf.Graph, global_step: tf.Tensor, batch_size: Optional[int] = None) -> StepWatch:
    """The ``StepWatch`` of ``graph``, made at its first step (reads the graph only: a finalized graph is fine).

    ``batch_size`` is the images one step of this process trains on, for images/s; by default the
    leading size of the graph's first batched input (none known: no images/s).
    """
    if graph not in _WATCHES:
        batch = images_per_step(graph) if batch_size is None else batch_size
        progress = graph_progress_tensors(graph)
        _WATCHES[graph] = StepWatch(
            NonfiniteWatch.for_graph(graph), global_step, dict(progress, step=global_step),
            Throughput(batch) if batch is not None else None, progress.get("loss_scale"),
        )
    return _WATCHES[graph]


def existing_step_watch(graph: tf.Graph) -> Optional[StepWatch]:
    """The ``StepWatch`` a loop made for ``graph``, or None if none ran there."""
    return _WATCHES.get(graph)


def watched_graphs() -> List[tf.Graph]:
    """The graphs a loop has watched steps in (and that are still alive)."""
    return list(_WATCHES.keys())
