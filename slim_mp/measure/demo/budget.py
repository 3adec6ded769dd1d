"""The demo's time-budget planner: whether the 128x128 timing fits, and how many training steps do.

The budget counts the whole process, the interpreter's start-up and imports included
(``process_started``), so the demo takes about as long on a laptop CPU as on a server: the training
steps are sized from the step times just measured and the time left, and a slow CPU trains fewer
steps instead of running longer.
"""

import os
import time
from typing import Optional

from slim_mp.datasets import get_dataset
from slim_mp.measure.demo.recorded_runs import native_figures_sentence
from slim_mp.measure.demo.speed import TIMING_WARMUP, SpeedComparison
from slim_mp.measure.demo.workload import BATCH_SIZE, DATASET, LARGE_IMAGE_SIZE

DEFAULT_BUDGET_SECONDS = 210.0
MIN_BUDGET_SECONDS = 30.0
# About 5 epochs of the 10k-image training subset: more would not change the comparison.
MAX_STEPS = 1500
# (steps, CifarNet's top-1 in percent) of the demo's training, as measured (150 steps: 75%): fewer
# than FEW_STEPS leave it far from its plateau, and the demo says so with these figures.
SHORT_RUN_TOP1 = ((60, 65), (300, 78))
FEW_STEPS = 150
# Fewer would show little but chance, so the demo trains this many even where they do not fit the
# budget, and says by how much they overrun it.
MIN_STEPS = 50
# Shares of the budget for the interleaved timings (training size, 128x128).
SPEED_SHARE = 0.08
LARGE_SPEED_SHARE = 0.45
# At 128x128 a step does 16 times the work, so fewer rounds already measure it well.
LARGE_MAX_ROUNDS = 10
# A training step (input pipeline, weight decay, progress fetches, first-step graph optimisation)
# against the random-input benchmark step: 1.0-1.5 in the demo's runs on the 2-core AVX512-BF16
# machine of docs/BENCHMARKS.md.
TRAIN_STEP_FACTOR = 1.6
# A cold measured placement costs about this many train steps of the timed size (micro-benchmarks,
# whole-step candidates, the check; CifarNet at 128x128 on the 2-core AVX512-BF16 machine of
# docs/BENCHMARKS.md: 130 s at 4 s a step), so the 128x128 timing's cost is known before it is built.
COLD_PLACEMENT_STEPS = 40
# Seconds kept free for the table and closing the processes.
END_MARGIN_SECONDS = 5.0


def process_started() -> float:
    """The ``time.monotonic()`` reading at this process's start (from ``/proc`` on Linux; elsewhere: now)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            started_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        age = max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        age = 0.0
    return time.monotonic() - age


def large_timing_cost(comparison: SpeedComparison) -> float:
    """Seconds a cold 128x128 comparison would take, scaled from the training size's step times by pixel count."""
    scale = (LARGE_IMAGE_SIZE / comparison.image_size) ** 2
    step = scale * max(comparison.float32_seconds, comparison.low_seconds)
    return comparison.low_build_seconds + step * (COLD_PLACEMENT_STEPS + 2 * (TIMING_WARMUP + LARGE_MAX_ROUNDS))


def large_timing_skipped(precision: str, native: bool, comparison: SpeedComparison, budget: float) -> Optional[str]:
    """Why the 128x128 timing is left out (quoting the native figures instead), or None to run it.

    Emulated low precision cannot pay at any size, so timing it would only spend the budget; where it
    is native, the timing runs when its estimated cost fits its share of the budget.
    """
    if not native:
        return f"not timed, {precision} is emulated here; {native_figures_sentence()}"
    cost = large_timing_cost(comparison)
    if cost > LARGE_SPEED_SHARE * budget:
        return (f"not timed, it would take about {cost:.0f}s of the {budget:.0f}s budget on this machine now; "
                f"{native_figures_sentence()}")
    return None


def training_seconds(steps: int, startup_seconds: float, comparison: SpeedComparison) -> float:
    """Estimated wall time of both training runs of ``steps`` steps: start-up, builds, training, evaluation.

    The step times come from ``comparison`` (the slower precision's, times ``TRAIN_STEP_FACTOR``); an
    evaluation is a graph build plus forward passes of about a third of a train step per batch.
    """
    train_step = TRAIN_STEP_FACTOR * max(comparison.float32_seconds, comparison.low_seconds)
    test_images = get_dataset(DATASET, "test").num_samples
    build = comparison.float32_build_seconds
    evaluation = build + test_images / BATCH_SIZE * train_step / 3
    return 2 * (startup_seconds + 2 * build + evaluation + steps * train_step)


def steps_that_fit(seconds_left: float, startup_seconds: float, comparison: SpeedComparison) -> int:
    """The most training steps per run whose ``training_seconds`` fit ``seconds_left`` (less an end margin).

    Clamped to ``MIN_STEPS``..``MAX_STEPS``: fewer than ``MIN_STEPS`` would show only chance accuracy,
    so the caller checks ``training_seconds`` and says when they overrun (``overrun_note``).
    """
    fixed = training_seconds(0, startup_seconds, comparison)
    per_step = training_seconds(1, startup_seconds, comparison) - fixed
    return max(MIN_STEPS, min(MAX_STEPS, int((seconds_left - END_MARGIN_SECONDS - fixed) / per_step)))


def overrun_note(steps: int, seconds_left: float, startup_seconds: float, comparison: SpeedComparison
                 ) -> Optional[str]:
    """The line saying how far ``steps`` steps of each run overrun the budget, or None when they fit."""
    overrun = training_seconds(steps, startup_seconds, comparison) + END_MARGIN_SECONDS - seconds_left
    if overrun <= 0:
        return None
    return (f"  (this machine is slower than the budget allows for {steps} steps: expect about {overrun:.0f}s "
            "more than the budget)")


def few_steps_note(steps: int) -> Optional[str]:
    """The line warning that ``steps`` steps leave the accuracy short of longer runs', or None for enough steps."""
    if steps >= FEW_STEPS:
        return None
    (short, short_top1), (longer, longer_top1) = SHORT_RUN_TOP1
    return (f"  ({steps} steps: accuracy will be below what longer runs reach, about {short_top1}% top-1 at "
            f"{short} steps, {longer_top1}% at {longer})")
