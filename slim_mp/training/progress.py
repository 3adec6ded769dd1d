"""Progress lines of the training loop: ``step=200 loss=0.532 loss_scale=32768 skipped=0 lr=0.001 images/s=812``."""

import dataclasses
import time
from typing import Optional


def format_progress(step: int, loss: float, loss_scale: float, skipped: int, learning_rate: float,
                    images_per_second: float) -> str:
    """Return one ``key=value`` progress line (space-separated, fixed key order)."""
    return (
        f"step={step} loss={loss:.4g} loss_scale={loss_scale:g} skipped={skipped} "
        f"lr={learning_rate:.6g} images/s={images_per_second:.0f}"
    )


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
