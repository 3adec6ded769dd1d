"""Progress lines of a training loop: ``step=200 loss=0.532 loss_scale=32768 skipped=0 lr=0.001 images/s=812``.

Our loop knows every value; a user's loop (a step function, a hook) finds the loss scale and the
skipped steps in the graph (``graph_progress_tensors``) and the images per step from the shape of
its input batch (``images_per_step``), and leaves out what its graph does not have.
"""

import dataclasses
import time
from typing import Dict, Optional

import tensorflow as tf

from slim_mp.loss_scale import LOSS_SCALE_COLLECTION, SKIPPED_STEPS_COLLECTION
from slim_mp.numerics import DATA_SOURCE_OP_TYPES


def format_progress(step: int, loss: Optional[float], loss_scale: Optional[float] = None,
                    skipped: Optional[int] = None, learning_rate: Optional[float] = None,
                    images_per_second: Optional[float] = None) -> str:
    """Return one ``key=value`` progress line (space-separated, fixed key order; None values are left out)."""
    fields = [f"step={step}"]
    if loss is not None:
        fields.append(f"loss={loss:.4g}")
    if loss_scale is not None:
        fields.append(f"loss_scale={loss_scale:g}")
    if skipped is not None:
        fields.append(f"skipped={skipped}")
    if learning_rate is not None:
        fields.append(f"lr={learning_rate:.6g}")
    if images_per_second is not None:
        fields.append(f"images/s={images_per_second:.0f}")
    return " ".join(fields)


def graph_progress_tensors(graph: tf.Graph) -> Dict[str, tf.Tensor]:
    """``loss_scale`` and ``skipped`` of the first loss-scaling optimizer applied in ``graph`` (empty without one)."""
    found = {}
    for key, collection in (("loss_scale", LOSS_SCALE_COLLECTION), ("skipped", SKIPPED_STEPS_COLLECTION)):
        tensors = graph.get_collection(collection)
        if tensors:
            found[key] = tensors[0]
    return found


def images_per_step(graph: tf.Graph) -> Optional[int]:
    """The batch size of ``graph``'s input: the static leading size of its first batched input-pipeline output.

    None when no input op (``tf.train.batch``'s dequeue, a ``tf.data`` iterator) has a known batch size.
    """
    for op in graph.get_operations():
        if op.type not in DATA_SOURCE_OP_TYPES:
            continue
        for output in op.outputs:
            if output.shape.rank is not None and output.shape.rank >= 2 and output.shape[0] is not None:
                return int(output.shape[0])
    return None


@dataclasses.dataclass
class Throughput:
    """Images per second over the window since the last ``rate()`` call, and over the whole run.

    The first step (graph optimisation, warm-up) is left out of the whole-run rate.
    """

    batch_size: int
    _window_start: float = dataclasses.field(default_factory=time.perf_counter)
    _window_steps: int = 0
    _run_start: Optional[float] = None
    _run_end: float = 0.0
    _run_steps: int = 0

    def step_done(self) -> None:
        """Count one training step."""
        now = time.perf_counter()
        if self._run_start is None:
            self._run_start = now
        else:
            self._run_steps += 1
            self._run_end = now
        self._window_steps += 1

    def rate(self) -> float:
        """Images per second since the previous call (or since creation); starts a new window."""
        now = time.perf_counter()
        elapsed = max(now - self._window_start, 1e-9)
        images = self._window_steps * self.batch_size
        self._window_start, self._window_steps = now, 0
        return images / elapsed

    def run_rate(self) -> Optional[float]:
        """Images per second from the end of the first step to the last counted one; None before two steps."""
        if self._run_start is None or self._run_steps == 0:
            return None
        return self._run_steps * self.batch_size / max(self._run_end - self._run_start, 1e-9)
