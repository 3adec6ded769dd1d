"""What a user's train step needs beyond the run itself, kept per graph: shared by the step function and the hook.

``StepWatch`` finds everything from the graph (the loss-scale and skipped-steps tensors the optimizer
registered, the non-finite probes, the batch size), so a step function of ``slim.learning.train``
or a ``SessionRunHook``, which get only a session, give what our loop gives: the non-finite
diagnosis of a skipped step, progress lines with loss scale, skipped steps and images/s,
divergence as a ``TrainingDivergedError``, and a stop after SIGTERM so the loop's own final save
writes the current step.
"""

import dataclasses
import weakref
from typing import Dict, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from slim_mp.loss_scale import TrainingDivergedError
from slim_mp.seams.divergence_report import diverged_error
from slim_mp.seams.nonfinite_watch import Feed, NonfiniteWatch
from slim_mp.seams.preemption import SigtermStop
from slim_mp.seams.progress import Throughput, format_progress, graph_progress_tensors, images_per_step

_WATCHES: "weakref.WeakKeyDictionary[tf.Graph, StepWatch]" = weakref.WeakKeyDictionary()


@dataclasses.dataclass
class StepWatch:
    """The per-graph state of a user's train steps: probes, progress tensors, throughput, SIGTERM, the last step."""

    nonfinite: NonfiniteWatch
    progress: Dict[str, tf.Tensor]
    throughput: Optional[Throughput]
    sigterm: SigtermStop = dataclasses.field(default_factory=SigtermStop)
    last_values: Optional[Dict[str, float]] = None
    # Set by the hook, for ``reporting_divergence``: the raw session, its global step, the running step's feed.
    session: Optional[tf.compat.v1.Session] = None
    global_step: Optional[tf.Tensor] = None
    last_feed: Feed = dataclasses.field(default_factory=dict)

    def before_step(self, session: tf.compat.v1.Session) -> Feed:
        """Read the step's batch for the probes (empty without them); the step runs with it fed."""
        return self.nonfinite.capture(session)

    def after_step(self, session: tf.compat.v1.Session, loss: Optional[float], feed: Feed, global_step: tf.Tensor,
                   extra: Optional[Dict[str, tf.Tensor]] = None) -> Dict[str, np.ndarray]:
        """Read the step, loss scale and skipped steps (and ``extra``) once the step is done; return ``extra``'s values.

        Read in a run of their own: fetched in the step's run, a read may come before or after the
        step's update. After a skipped step the probes replay it and a WARNING names the first inf/NaN.
        """
        fetched = session.run(dict(extra or {}, **self.progress, step=global_step))
        values = {key: fetched[key] for key in (*self.progress, "step")}
        if loss is not None:
            values["loss"] = loss
        self.nonfinite.after_step(session, values, feed)
        if self.throughput is not None:
            self.throughput.step_done()
        self.last_values = {key: float(value) for key, value in values.items()}
        return {key: fetched[key] for key in extra or {}}

    def progress_line(self) -> str:
        """The progress line of the last step; images/s over the steps since the previous line."""
        values = self.last_values or {}
        skipped = values.get("skipped")
        return format_progress(
            int(values.get("step", 0)), values.get("loss"), values.get("loss_scale"),
            None if skipped is None else int(skipped), None,
            self.throughput.rate() if self.throughput is not None else None,
        )

    def diverged(self, error: tf.errors.OpError, session: Optional[tf.compat.v1.Session], feed: Feed,
                 global_step: Optional[tf.Tensor] = None) -> Optional[TrainingDivergedError]:
        """``error`` as a ``TrainingDivergedError`` with the diagnosis, step and loss scale; None if no divergence.

        With a live ``session`` the step and scale are read from it, else (a closed session) taken from the last step.
        """
        explained = self.nonfinite.explain(error, session, feed)
        last = self.last_values or {}
        live = session is not None and global_step is not None
        step = int(session.run(global_step)) if live else int(last.get("step", 0))

        def read_loss_scale() -> Optional[float]:
            if live and "loss_scale" in self.progress:
                return float(session.run(self.progress["loss_scale"]))
            return last.get("loss_scale")

        return diverged_error(explained, step + 1, read_loss_scale)

    def stop_requested(self, where: str) -> bool:
        """True once SIGTERM arrived: logs that the loop stops and ``where`` the current step is saved."""
        if not self.sigterm.requested:
            return False
        step = int((self.last_values or {}).get("step", 0))
        logging.warning("terminated by SIGTERM at step %d; stopping so that %s saves model.ckpt-%d; "
                        "rerun the same command to resume", step, where, step)
        self.sigterm.restore()
        return True


def step_watch(graph: tf.Graph) -> StepWatch:
    """The ``StepWatch`` of ``graph``, made at its first step (reads the graph only: a finalized graph is fine)."""
    if graph not in _WATCHES:
        batch = images_per_step(graph)
        _WATCHES[graph] = StepWatch(NonfiniteWatch.for_graph(graph), graph_progress_tensors(graph),
                                    Throughput(batch) if batch is not None else None)
    return _WATCHES[graph]


def existing_step_watch(graph: tf.Graph) -> Optional[StepWatch]:
    """The ``StepWatch`` a step function or hook made for ``graph``, or None if none ran there."""
    return _WATCHES.get(graph)
