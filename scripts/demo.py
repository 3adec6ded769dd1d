"""``make demo``: float32 against mixed precision on the bundled Fashion-MNIST, within a fixed time budget.

What it shows, in about 3.5 minutes on any CPU (``--budget_seconds``, default 210):

1. What this device can do: bfloat16 (or, on a GPU with tensor cores, float16) native or emulated,
   and what the pass's measured placement can therefore make of it (``slim_mp.devices``).
2. Speed at the training size: a float32 and a mixed-precision train step of CifarNet (32x32,
   batch 32, random images), timed step by step, interleaved, so load on the machine hits both
   alike. The mixed-precision step uses the default measured placement; its decisions are the ones
   the mixed-precision training run then trains with.
3. Speed at 128x128 (speed only), where bfloat16 is native and the cost fits the budget; where it
   is emulated the demo quotes the figure measured on a CPU where it is native instead.
4. Two training runs from scratch, the same number of steps each, each in a fresh process:
   float32 and mixed precision, each evaluated on the 2000 test images. The steps are sized from
   the step times just measured and the time left, so a slow CPU trains fewer steps instead of
   running longer. CifarNet has no batch norm, so its accuracy means something after the hundred
   or so steps a slow laptop CPU fits in the budget (batch norm's moving averages would still be
   near their initial values).

Only the demo's own lines reach the screen: TensorFlow's and absl's log lines go to
``<output_dir>/tensorflow.log``. Outputs (checkpoints, TensorBoard events, metrics, the rewrite
report, the placement decisions) go under ``runs/demo/``.

    python scripts/demo.py [--budget_seconds 210] [--steps N] [--output_dir runs/demo]

Bad input prints one ``error: ...`` line and exits with status 2 (``--verbose`` adds the traceback).
"""

import atexit
import os
import sys
import tempfile
import time


def _native_stderr_to_temporary_file() -> str:
    """Point file descriptor 2 at a temporary file, keep Python's ``sys.stderr`` on the terminal; return the path.

    TensorFlow's C++ logging writes to descriptor 2 from its import on, before the flags name the
    output folder; ``main`` then moves what was written into the output folder's log.
    """
    terminal = os.fdopen(os.dup(2), "w", buffering=1)
    handle, path = tempfile.mkstemp(prefix="slim_mp_demo_", suffix=".log")
    os.dup2(handle, 2)
    os.close(handle)
    sys.stderr = terminal
    atexit.register(lambda: os.path.exists(path) and os.remove(path))
    return path


def _process_age_seconds() -> float:
    """Seconds since this process started (from ``/proc`` on Linux, else 0): the budget counts the start-up."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            started_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


PROCESS_STARTED = time.monotonic() - _process_age_seconds()
# Only the demo's own process: the training runs' processes import this file under another name and
# inherit descriptor 2, by then the output folder's log.
EARLY_LOG = _native_stderr_to_temporary_file() if __name__ == "__main__" else None

import dataclasses  # noqa: E402  (after the redirection above, like every import below)
import multiprocessing  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
from typing import Callable, List, Optional  # noqa: E402

from absl import flags  # noqa: E402

import tensorflow as tf  # noqa: E402

from slim_mp.datasets import get_dataset  # noqa: E402
from slim_mp.devices import (DeviceInfo, detect_device, precision_support, preferred_low_precision,  # noqa: E402
                             speed_outlook)
from slim_mp.graph_pass import DECISIONS_FILE_NAME, PlacementOptions  # noqa: E402
from slim_mp.timing import paired_ratio  # noqa: E402
from slim_mp.measure.benchmark import benchmark_step  # noqa: E402
from slim_mp.training import (EvalConfig, LearningRateSettings, OptimizerSettings, PrecisionOptions,  # noqa: E402
                              TrainConfig, cli, evaluate, prepare_output_dir, train)
from slim_mp.training.library_logs import send_library_logs_to  # noqa: E402

MODEL = "cifarnet"
DATASET = "fashion_mnist"
IMAGE_SIZE = 32
LARGE_IMAGE_SIZE = 128
BATCH_SIZE = 32
EVAL_BATCH_SIZE = 200
SEED = 0
LOG_FILE_NAME = "tensorflow.log"
# About 5 epochs of the 10k-image training subset: more would not change the comparison.
MAX_STEPS = 1500
# Fewer steps than this leave CifarNet's accuracy far from its plateau (60 steps: 65% top-1, 150: 75%,
# 300: 78%); fewer than MIN_STEPS would show little but chance, so the demo trains that many even
# where they do not fit the budget, and says so.
FEW_STEPS = 150
MIN_STEPS = 50
TIMING_WARMUP = 2
# Timed runs per op of the measured placement where low precision is emulated (the default is 7).
EMULATED_PLACEMENT_RUNS = 3
PROBE_ROUNDS = 3
MAX_ROUNDS = 60
# At 128x128 a step does 16 times the work, so fewer rounds already measure it well.
LARGE_MAX_ROUNDS = 10
# Shares of the budget for the interleaved timings (training size, 128x128).
SPEED_SHARE = 0.08
LARGE_SPEED_SHARE = 0.45
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
# What the same step gives where bfloat16 is native, quoted where it is not timed (docs/BENCHMARKS.md).
NATIVE_FIGURES = ("where bfloat16 is native (a 2-core AMD EPYC with AVX512-BF16, docs/BENCHMARKS.md) this "
                  "CifarNet step runs at 1.19x float32's speed at 32x32 and 1.40x at 128x128")

FLAGS = flags.FLAGS
flags.DEFINE_float("budget_seconds", 210.0, "Wall time the whole demo aims at, imports included; the training "
                   "steps are sized to fit it.", lower_bound=30.0)
flags.DEFINE_integer("steps", None, "Training steps of each run; unset: as many as fit --budget_seconds "
                     f"(at most {MAX_STEPS}).", lower_bound=1)
flags.DEFINE_string("output_dir", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                               "runs", "demo"), "Where the runs and the log go.")


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


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """One training run's row of the table."""

    precision: str
    final_loss: float
    accuracy: float
    images_per_second: float


def _say(line: str) -> None:
    print(line, flush=True)


def _progress_printer(precision: str, steps: int) -> Callable[[str], None]:
    """Print the training loop's progress lines prefixed with the precision and followed by an ETA."""
    started = time.monotonic()

    def print_line(line: str) -> None:
        step = int(line.split()[0].split("=")[1])
        remaining = (time.monotonic() - started) / max(step, 1) * (steps - step)
        _say(f"  {precision:<8} {line} eta={remaining:.0f}s")

    return print_line


def run_one(precision: str, steps: int, output_dir: str, decisions_file: Optional[str]) -> tuple:
    """Train from scratch in ``precision`` (pinned to ``decisions_file``'s placement), evaluate; the row's fields.

    A plain tuple goes back to the demo's process: a class of this script would be pickled under
    the child's module name, which the parent may not know (unpickling fails, and the pool waits).
    """
    send_library_logs_to(os.path.join(output_dir, LOG_FILE_NAME))
    train_dir = os.path.join(output_dir, precision)
    shutil.rmtree(train_dir, ignore_errors=True)
    if decisions_file:
        os.makedirs(train_dir)
        shutil.copyfile(decisions_file, os.path.join(train_dir, DECISIONS_FILE_NAME))
    num_samples = get_dataset(DATASET, "train").num_samples
    config = TrainConfig(
        train_dir=train_dir, dataset_name=DATASET, model_name=MODEL, preprocessing_name="cifarnet",
        train_image_size=IMAGE_SIZE, batch_size=BATCH_SIZE, max_number_of_steps=steps,
        log_every_n_steps=max(1, steps // 8), save_summaries_secs=30, num_preprocessing_threads=2,
        weight_decay=1e-4, seed=SEED, optimizer_settings=OptimizerSettings(optimizer="momentum", momentum=0.9),
        # One linear decay over the run, whatever its length, so short and long runs both end settled.
        learning_rate_settings=LearningRateSettings(
            learning_rate_decay_type="polynomial", learning_rate=0.05, end_learning_rate=0.0005,
            num_epochs_per_decay=steps * BATCH_SIZE / num_samples),
        precision_options=PrecisionOptions(
            precision=precision,
            mp_report=None if precision == "float32" else os.path.join(output_dir, f"rewrite_{precision}.json")),
    )
    result = train(config, print_line=_progress_printer(precision, steps))
    metrics = evaluate(
        EvalConfig(checkpoint_path=train_dir, eval_dir=os.path.join(train_dir, "eval"), dataset_name=DATASET,
                   model_name=MODEL, preprocessing_name="cifarnet", eval_image_size=IMAGE_SIZE,
                   batch_size=EVAL_BATCH_SIZE, num_preprocessing_threads=2,
                   precision_options=PrecisionOptions(precision=precision)),
        print_line=lambda line: None,
    )
    _say(f"  {precision:<8} top-1 {metrics['accuracy']:.4f} on the {DATASET} test split")
    return dataclasses.astuple(RunSummary(precision, result.loss, metrics["accuracy"], result.images_per_second or 0.0))


def run_in_fresh_process(precision: str, steps: int, output_dir: str, decisions_file: Optional[str]) -> RunSummary:
    """``run_one`` in a child process of its own.

    Training throughput drifts down over successive runs in one process (four 400-step runs in a
    row: 759, 720, 675, 697 images/s), which would favour whichever precision trains first.
    """
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return RunSummary(*pool.apply(run_one, (precision, steps, output_dir, decisions_file)))


def demo_placement_options(native: bool, decisions_file: Optional[str]) -> PlacementOptions:
    """The measured placement's options: the defaults where low precision is native; cheaper where it is emulated.

    Emulated low precision makes every whole-step timing of a low candidate slow (seconds a step on a
    laptop CPU), which alone could spend the demo's budget; the per-op timings already show it
    losing, so there the placement decides on them alone, with fewer runs.
    """
    if native:
        return PlacementOptions(decisions_file=decisions_file)
    return PlacementOptions(decisions_file=decisions_file, time_steps=False, warmup=1, runs=EMULATED_PLACEMENT_RUNS)


def time_side_by_side(precision: str, image_size: int, seconds: float, options: PlacementOptions,
                      max_rounds: int = MAX_ROUNDS) -> SpeedComparison:
    """Build float32 and mixed-precision train steps at ``image_size`` and time them interleaved for ~``seconds``.

    The mixed-precision step uses the measured placement with ``options`` (its build includes the
    placement's timing). After the builds, a few probe rounds measure the step times; the rounds
    that fit ``seconds`` follow, at most ``max_rounds`` in all.
    """
    steps, build_seconds = {}, {}
    for config in ("float32", "slim_mp"):
        started = time.monotonic()
        steps[config] = benchmark_step.build_benchmark_step(config, MODEL, tf.as_dtype(precision), BATCH_SIZE,
                                                            image_size, num_classes=10, seed=SEED,
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
        return f"not timed, {precision} is emulated here; {NATIVE_FIGURES}"
    cost = large_timing_cost(comparison)
    if cost > LARGE_SPEED_SHARE * budget:
        return (f"not timed, it would take about {cost:.0f}s of the {budget:.0f}s budget on this machine now; "
                f"{NATIVE_FIGURES}")
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
    so the caller checks ``training_seconds`` and says when they overrun.
    """
    fixed = training_seconds(0, startup_seconds, comparison)
    per_step = training_seconds(1, startup_seconds, comparison) - fixed
    return max(MIN_STEPS, min(MAX_STEPS, int((seconds_left - END_MARGIN_SECONDS - fixed) / per_step)))


def format_table(rows: List[RunSummary], speedup: float, below_one: Optional[str] = None) -> str:
    """The comparison table; the speed-up column is the interleaved timing at the training size.

    ``below_one`` is the reason printed under the table when that speed-up is below 1x.
    """
    lines = [f"{'precision':<10} {'final loss':>10} {'top-1':>7} {'images/s':>9} {'speed-up':>8}"]
    for row, row_speedup in zip(rows, (1.0, speedup)):
        lines.append(f"{row.precision:<10} {row.final_loss:>10.4f} {row.accuracy:>7.4f} "
                     f"{row.images_per_second:>9.1f} {row_speedup:>7.2f}x")
    lines.append("  (speed-up: the interleaved timing above; images/s: the two training runs, one after the "
                 "other, so load on the machine can tilt them)")
    if below_one:
        lines.append(f"  ({rows[1].precision} speed-up {below_one})")
    return "\n".join(lines)


def main() -> None:
    """Explain the device, time both precisions, train both within the budget, print the table."""
    budget, output_dir = FLAGS.budget_seconds, FLAGS.output_dir
    prepare_output_dir(output_dir, "--output_dir")
    log_path = os.path.join(output_dir, LOG_FILE_NAME)
    shutil.copyfile(EARLY_LOG or os.devnull, log_path)
    send_library_logs_to(log_path)
    startup_seconds = time.monotonic() - PROCESS_STARTED
    deadline = PROCESS_STARTED + budget
    device = detect_device()
    low = preferred_low_precision(device)
    native = precision_support(device)[low].native
    _say(f"slim_mp demo: {MODEL} on {DATASET}, float32 vs {low}, aiming at {budget:.0f}s "
         f"(TensorFlow's log: {log_path})")
    for line in describe_device(device, low):
        _say(line)

    _say(f"\n== speed: {MODEL} train steps at {IMAGE_SIZE}x{IMAGE_SIZE}, batch {BATCH_SIZE}, random images, "
         f"float32 and {low} interleaved (first the measured placement times the ops)")
    decisions_file = os.path.join(output_dir, f"placement_{low}.json")
    if os.path.exists(decisions_file):
        os.remove(decisions_file)
    if not native:
        _say(f"  ({low} is emulated: the placement decides from per-op timings alone, not whole steps, "
             "to stay within the budget)")
    small = time_side_by_side(low, IMAGE_SIZE, SPEED_SHARE * budget, demo_placement_options(native, decisions_file))
    _say(placement_line(low, small))
    _say(speed_line(low, small, native))

    skip_large = large_timing_skipped(low, native, small, budget)
    if skip_large:
        _say(f"  {LARGE_IMAGE_SIZE}x{LARGE_IMAGE_SIZE}: {skip_large}")
    else:
        large = time_side_by_side(low, LARGE_IMAGE_SIZE, LARGE_SPEED_SHARE * budget,
                                  demo_placement_options(native, None), max_rounds=LARGE_MAX_ROUNDS)
        _say(speed_line(low, large, native))

    seconds_left = deadline - time.monotonic()
    steps = FLAGS.steps or steps_that_fit(seconds_left, startup_seconds, small)
    sized = "" if FLAGS.steps else f", as many as fit the {budget:.0f}s budget at the step times above"
    _say(f"\n== training {MODEL} from scratch, {steps} steps in each precision{sized}")
    overrun = training_seconds(steps, startup_seconds, small) + END_MARGIN_SECONDS - seconds_left
    if overrun > 0:
        _say(f"  (this machine is slower than the budget allows for {steps} steps: expect about {overrun:.0f}s "
             "more than the budget)")
    if steps < FEW_STEPS:
        _say(f"  ({steps} steps: accuracy will be below what longer runs reach, about 65% top-1 at 60 steps, "
             "78% at 300)")
    rows = [run_in_fresh_process(precision, steps, output_dir, None if precision == "float32" else decisions_file)
            for precision in ("float32", low)]

    _say(f"\n{MODEL} on {DATASET} ({IMAGE_SIZE}x{IMAGE_SIZE}, batch {BATCH_SIZE}, {steps} steps, seed {SEED}, "
         f"{get_dataset(DATASET, 'test').num_samples} test images)")
    _say(format_table(rows, small.speedup, below_one_reason(low, small, native)))
    _say(f"outputs under {output_dir}; wall time {time.monotonic() - PROCESS_STARTED:.0f}s")


if __name__ == "__main__":
    cli.run(main)
