"""``debug_nonfinite`` in a training loop: replay a failing step's batch to find its first inf/NaN.

With probes, each step first reads its batch and loss scale (the probes' ``captured`` tensors)
and then runs the unchanged train step with them fed, so a failing step can be replayed: after a
step skipped for non-finite gradients, or a step whose loss check failed, the probes' is-finite
flags run once on the same inputs. Without probes nothing changes. The watched step of every loop
(``step_watch``) builds one from the graph (``for_graph``), which also tells the graph that its
probes are watched (no "nothing runs them" warning).
"""

from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from slim_mp.loss_scale import LOSS_SCALE_GUARD, read_divergence, with_diagnosis
from slim_mp.numerics import Nonfinite, NonfiniteProbe, watch_probes

Feed = Dict[tf.Tensor, np.ndarray]


class NonfiniteWatch:
    """Captures each step's inputs for the probes; names the origin of a failing step's inf/NaN."""

    def __init__(self, probes: Sequence[NonfiniteProbe]) -> None:
        self._probes = list(probes)
        self._skipped = 0  # the run's skip counter is a local variable that starts at 0
        self.last_origin: Optional[Nonfinite] = None

    @classmethod
    def for_graph(cls, graph: tf.Graph) -> "NonfiniteWatch":
        """The watch of every probe built in ``graph`` (none without ``debug_nonfinite``)."""
        return cls(watch_probes(graph))

    def capture(self, session: tf.compat.v1.Session) -> Feed:
        """Read this step's batch and loss scale; the train step runs with them fed (empty without probes)."""
        tensors = [t for probe in self._probes for t in probe.captured]
        return dict(zip(tensors, session.run(tensors))) if tensors else {}

    def diagnose(self, session: tf.compat.v1.Session, feed: Feed) -> Optional[Nonfinite]:
        """Replay ``feed`` through the probes; the first inf/NaN found (kept as ``last_origin``), or None."""
        for probe in self._probes:
            origin = probe.diagnose(session, feed)
            if origin is not None:
                self.last_origin = origin
                return origin
        return None

    def after_step(self, session: tf.compat.v1.Session, values: Dict, feed: Feed, step: int
                   ) -> Optional[Nonfinite]:
        """When the skipped-step count went up, replay the step and log one WARNING naming the first inf/NaN.

        ``step`` is the number of the step that ran (1-based), as the divergence sentence counts.
        """
        if not self._probes or "skipped" not in values:
            return None
        skipped = int(values["skipped"])
        newly_skipped, self._skipped = skipped > self._skipped, skipped
        if not newly_skipped:
            return None
        origin = self.diagnose(session, feed)
        if origin is None:
            logging.warning("step %d was skipped for non-finite gradients, but replaying its batch gave finite "
                            "values everywhere (random ops, or gradients changed after the backward pass)", step)
        else:
            logging.warning("step %d was skipped for non-finite gradients: %s", step, origin.describe())
        return origin

    def explain(self, error: tf.errors.OpError, session: Optional[tf.compat.v1.Session],
                feed: Feed) -> tf.errors.OpError:
        """``error`` with the origin of its inf/NaN added (the loss check, the divergence guard), or unchanged.

        The guard fires a step after the last skipped one, whose replay already found the origin;
        a failed loss check is replayed now (only with a ``session``: a closed one cannot replay).
        """
        if not self._probes or not isinstance(error, tf.errors.InvalidArgumentError):
            return error
        divergence = read_divergence(error)
        if divergence is not None and divergence.diagnosis is not None:
            return error
        guard = divergence is not None and divergence.check == LOSS_SCALE_GUARD
        origin = self.last_origin if guard or session is None else self.diagnose(session, feed)
        return error if origin is None else with_diagnosis(error, origin.describe())
