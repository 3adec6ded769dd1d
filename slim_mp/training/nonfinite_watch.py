"""``--mp_debug_nonfinite`` in the training loop: after a skipped step, replay its batch to find the first inf/NaN.

The normal step only fetches, besides its progress values, the batch and loss scale it already
computed (the graph is unchanged); the probes' flags run only after a skipped step.
"""

import contextlib
from typing import Dict, Iterator, List, Optional, Sequence

import tensorflow as tf
from absl import logging

from slim_mp.numerics.nonfinite import NonfiniteOrigin, NonfiniteProbe

CAPTURE_KEY = "nonfinite_capture"
DIVERGENCE_MARKER = "Training diverged"


class NonfiniteWatch:
    """Captures each step's inputs for the probes; names the origin of a skipped step's inf/NaN in one WARNING."""

    def __init__(self, probes: Sequence[NonfiniteProbe]) -> None:
        self._probes = list(probes)
        self._skipped = 0
        self.last_origin: Optional[NonfiniteOrigin] = None

    def fetches(self) -> Dict[str, List[List[tf.Tensor]]]:
        """Extra fetches for the train step's ``session.run`` (empty without probes)."""
        return {CAPTURE_KEY: [probe.captured for probe in self._probes]} if self._probes else {}

    def after_step(self, session: tf.compat.v1.Session, values: Dict) -> Optional[NonfiniteOrigin]:
        """When the skipped-step count went up, replay the captured inputs and log where inf/NaN first appeared."""
        if not self._probes:
            return None
        skipped = int(values["skipped"])  # the run's counter: a local variable that starts at 0
        newly_skipped = skipped > self._skipped
        self._skipped = skipped
        if not newly_skipped:
            return None
        origin = None
        for probe, captured in zip(self._probes, values[CAPTURE_KEY]):
            origin = probe.diagnose(session, captured)
            if origin is not None:
                break
        if origin is None:
            logging.warning("step %d was skipped for non-finite gradients, but replaying its batch gave finite "
                            "values everywhere (random ops, or gradients changed after the backward pass)",
                            int(values["step"]))
        else:
            logging.warning("step %d was skipped for non-finite gradients: %s", int(values["step"]),
                            origin.describe())
            self.last_origin = origin
        return origin

    @contextlib.contextmanager
    def explaining_divergence(self) -> Iterator[None]:
        """Add the last known origin to the divergence guard's error, keeping its type."""
        try:
            yield
        except tf.errors.InvalidArgumentError as error:
            if self.last_origin is None or DIVERGENCE_MARKER not in error.message:
                raise
            raise type(error)(error.node_def, error.op,
                              f"{error.message} Diagnosis (--mp_debug_nonfinite): {self.last_origin.describe()}.") \
                from error
