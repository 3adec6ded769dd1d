"""The demo's speed comparison: float32 and mixed-precision train steps timed interleaved, and what it printed.

Both steps are built at one image size with random images (``slim_mp.measure.benchmark``); the
mixed-precision step uses the default measured placement, whose decisions file the mixed-precision
training run then reuses, so the speed-up printed is the placement that trained. The steps run in
interleaved rounds (``slim_mp.timing``), so load on the machine hits both alike.
"""

import dataclasses
import statistics
import time
from typing import List, Optional

import tensorflow as tf

from slim_mp.devices import DeviceInfo, precision_support, speed_outlook
from slim_mp.graph_pass import PlacementFiles, PlacementMeasuring, PlacementOptions
from slim_mp.measure.benchmark import benchmark_step
from slim_mp.measure.demo.workload import BATCH_SIZE, MODEL, NUM_CLASSES, SEED
from slim_mp.timing import paired_ratio

# Untimed calls of each step before its rounds.
TIMING_WARMUP = 2
# Timed runs per op of the measured placement where low precision is emulated (``PlacementMeasuring.runs``' default: 7).
EMULATED_PLACEMENT_RUNS = 3
# Rounds that measure the step times, before the rounds that fit the timing's share of the budget.
PROBE_ROUNDS = 3
MAX_ROUNDS = 60


@dataclasses.dataclass(frozen=True)
class SpeedComparison:
    """float32 against mixed precision, timed interleaved at one image size."""

    image_size: int
    rounds: int
    float32_seconds: float
    low_seconds: float
    speedup: float
    float32_build_seconds: float
    low_build_seconds: float
    low_ops: int
    float32_ops: int


def demo_placement_options(native: bool, decisions_file: Optional[str]) -> PlacementOptions:
    """The measured placement's options: the defaults where low precision is native; cheaper where it is emulated.

    Emulated low precision makes every whole-step timing of a low candidate slow (seconds a step on a
    laptop CPU), which alone could spend the demo's budget; the per-op timings already show it
    losing, so there the placement decides on them alone, with fewer runs.
    """
    files = PlacementFiles(decisions_file=decisions_file)
    if native:
        return PlacementOptions(files)
    return PlacementOptions(files, PlacementMeasuring(time_steps=False, warmup=1, runs=EMULATED_PLACEMENT_RUNS))


def time_side_by_side(precision: str, image_size: int, seconds: float, options: PlacementOptions,
                      max_rounds: int = MAX_ROUNDS) -> SpeedComparison:
    """Build float32 and mixed-precision train steps at ``image_size`` and time them interleaved for ~``seconds``.

    The mixed-precision step uses the measured placement with ``options`` (its build includes the
    placement's timing). After the builds, ``PROBE_ROUNDS`` rounds measure the step times; the rounds
    that fit ``seconds`` follow, at most ``max_rounds`` in all.
    """
    steps, build_seconds = {}, {}
    for config in ("float32", "slim_mp"):
        started = time.monotonic()
        steps[config] = benchmark_step.build_benchmark_step(config, MODEL, tf.as_dtype(precision), BATCH_SIZE,
                                                            image_size, num_classes=NUM_CLASSES, seed=SEED,
                                                            placement_options=options)
        build_seconds[config] = time.monotonic() - started
    try:
        runs = {config: step.session.make_callable(step.train_op) for config, step in steps.items()}
        started = time.monotonic()
        times = benchmark_step.interleaved_times(runs, PROBE_ROUNDS, warmup=TIMING_WARMUP)
        round_seconds = sum(statistics.median(values) for values in times.values())
        more = min(max_rounds, int((seconds - (time.monotonic() - started)) / round_seconds)) - PROBE_ROUNDS
        if more > 0:
            for config, values in benchmark_step.interleaved_times(runs, more, warmup=0).items():
                times[config].extend(values)
    finally:
        for step in steps.values():
            step.session.close()
    plan = steps["slim_mp"].placement
    return SpeedComparison(
        image_size, len(times["float32"]), statistics.median(times["float32"]), statistics.median(times["slim_mp"]),
        1.0 / paired_ratio(times["slim_mp"], times["float32"]), build_seconds["float32"],
        build_seconds["slim_mp"], len(plan.low_ops) if plan else 0, len(plan.float32_ops) if plan else 0)


def describe_device(device: DeviceInfo, precision: str) -> List[str]:
    """The lines saying what ``device`` can do in ``precision`` and what the measured placement can make of it."""
    support = precision_support(device)[precision]
    return [f"device: {device.describe()}", f"  {support.describe()}", f"  {speed_outlook(support)}"]


def placement_line(precision: str, comparison: SpeedComparison) -> str:
    """What the measured placement chose at the training size."""
    total = comparison.low_ops + comparison.float32_ops
    return (f"  measured placement at {comparison.image_size}x{comparison.image_size}: {comparison.low_ops} of "
            f"{total} conv/matmul ops in {precision}, {comparison.float32_ops} kept float32 (where {precision} timed "
            "slower on this device, or not faster beyond the timing noise)")


def below_one_reason(precision: str, comparison: SpeedComparison, native: bool) -> Optional[str]:
    """Why ``comparison``'s speed-up is below 1x as printed (two decimals), or None when it is not."""
    if round(comparison.speedup, 2) >= 1.0:
        return None
    if comparison.low_ops == 0:
        return (f"below 1x although the placement kept every op float32 ({precision} timed slower), "
                "so both steps compute alike and the gap is timing noise")
    if not native:
        return f"below 1x because {precision} is emulated on this CPU: the ops left in it run slower"
    return ("below 1x: the placement was decided on timings the machine's load later tilted "
            "(docs/BENCHMARKS.md, robust to load)")


def speed_line(precision: str, comparison: SpeedComparison, native: bool) -> str:
    """One comparison's result; a speed-up below 1x comes with its reason."""
    size = f"{comparison.image_size}x{comparison.image_size}"
    line = (f"  {size}: float32 {comparison.float32_seconds * 1000:.1f} ms/step, {precision} "
            f"{comparison.low_seconds * 1000:.1f} ms/step: {precision} runs at {comparison.speedup:.2f}x "
            f"float32's speed (median of {comparison.rounds} interleaved step pairs)")
    reason = below_one_reason(precision, comparison, native)
    return f"{line}; {reason}" if reason else line
