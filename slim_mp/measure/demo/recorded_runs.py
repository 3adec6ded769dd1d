"""The ``make demo`` runs the documents report: the one source of every demo figure quoted in two places.

The demo quotes ``NATIVE_RUN``'s speed-ups where it cannot time them itself (bfloat16 emulated, or
the 128x128 timing over its share of the budget); README.md's front page sums up every run here and
docs/operations.md ("The demo") tells each one. ``tests/measure/test_demo_figures.py`` fails when a
document's figure disagrees with a record, so a new measurement is entered here and the test names
every sentence left to update.
"""

import dataclasses
from typing import List, Optional, Tuple

from slim_mp.measure.demo.workload import IMAGE_SIZE, LARGE_IMAGE_SIZE


@dataclasses.dataclass(frozen=True)
class RecordedDemo:
    """One ``make demo`` run: the machine, its wall time, and the speed-ups it printed.

    ``machine`` is written as both documents name it. ``make_seconds`` is ``make demo``'s wall
    time; ``install_seconds``, when set, is the part of it a fresh venv's install took. The
    speed-ups are mixed precision's against float32 at the training size and (when it was timed)
    at 128x128.
    """

    machine: str
    make_seconds: int
    speedup: float
    large_speedup: Optional[float] = None
    install_seconds: Optional[int] = None

    def summary(self) -> str:
        """The run in the front page's words: ``183 s, 1.32× at 32×32, 1.46× at 128×128``."""
        install = " with a fresh install" if self.install_seconds else ""
        parts = [f"{self.make_seconds} s{install}", f"{self.speedup:.2f}× at {IMAGE_SIZE}×{IMAGE_SIZE}"]
        if self.large_speedup is not None:
            parts.append(f"{self.large_speedup:.2f}× at {LARGE_IMAGE_SIZE}×{LARGE_IMAGE_SIZE}")
        return ", ".join(parts)

    def figures(self) -> List[str]:
        """Every figure of the run as docs/operations.md writes it (``183 s``, ``1.32×``), the install's split too."""
        speedups = [self.speedup] + ([] if self.large_speedup is None else [self.large_speedup])
        seconds = [self.make_seconds]
        if self.install_seconds:
            seconds += [self.install_seconds, self.make_seconds - self.install_seconds]
        return [f"{value} s" for value in seconds] + [f"{value:.2f}×" for value in speedups]


NATIVE_RUN = RecordedDemo("2-core AMD EPYC with AVX512-BF16", make_seconds=183, speedup=1.32, large_speedup=1.46)
RECORDED_RUNS: Tuple[RecordedDemo, ...] = (
    NATIVE_RUN,
    RecordedDemo("2-core Intel Xeon with AMX", make_seconds=182, speedup=1.29, large_speedup=1.45,
                 install_seconds=45),
    RecordedDemo("2-core AMD EPYC with AVX2 only", make_seconds=256, speedup=1.00, install_seconds=68),
    RecordedDemo("2-core Intel Xeon with oneDNN off", make_seconds=136, speedup=1.01),
)


def native_figures_sentence() -> str:
    """What the demo prints where it does not time 128x128 itself: ``NATIVE_RUN``'s speed-ups, labelled."""
    return (f"where bfloat16 is native (a {NATIVE_RUN.machine}, docs/operations.md) this CifarNet step runs at "
            f"{NATIVE_RUN.speedup:.2f}x float32's speed at {IMAGE_SIZE}x{IMAGE_SIZE} and "
            f"{NATIVE_RUN.large_speedup:.2f}x at {LARGE_IMAGE_SIZE}x{LARGE_IMAGE_SIZE}")
