"""``make demo``: train ResNet-v1-18 on the bundled Fashion-MNIST in float32 and in mixed precision, then compare.

Both runs use the same steps, seed and hyper-parameters; mixed precision is bfloat16 on CPUs and
float16 on GPUs with tensor cores (compute capability 7.0 or newer). Each run is evaluated on the
test split, and a table of final loss (the last step's total training loss, weight decay
included), top-1 test accuracy, training throughput and speed-up is printed. 1600 steps (about
5 epochs of the 10k-image subset) let batch norm's moving statistics settle, so the accuracies
are comparable; shorter runs are noticeably noisier.
Mixed precision uses the pass's default measured placement: ops that are slower in low precision
on this machine at this size stay float32 (on a CPU, small 32x32 images are such a case). The two
training runs follow each other, each in a fresh process, so load on a shared machine can tilt
their throughputs; the table's speed-up therefore comes from train steps timed interleaved,
step by step, at the training size, and a second line does the same on larger (random) images,
where low precision pays, so both regimes are shown.
Outputs (checkpoints, TensorBoard events, metrics, the rewrite report) go under ``runs/demo/``.

    python scripts/demo.py [--steps 1600] [--output_dir runs/demo]

Bad input prints one ``error: ...`` line and exits with status 2 (``--verbose`` adds the traceback).
"""

import dataclasses
import multiprocessing
import os
import shutil
import time
from typing import List, Optional

from absl import flags

import tensorflow as tf

from slim_mp.datasets import get_dataset
from slim_mp.devices import detect_device, preferred_low_precision
from slim_mp.json_files import ListOf, MaybeMissing, read_json_file
from slim_mp.graph_pass.placement import DECISIONS_FILE_NAME, PlacementOptions
from slim_mp.training import (EvalConfig, LearningRateSettings, OptimizerSettings, PrecisionOptions, TrainConfig, cli,
                              evaluate, train)
from slim_mp.measure import benchmark_step

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODEL = "resnet_v1_18"
IMAGE_SIZE = 32
BATCH_SIZE = 32
SEED = 0
# Speed-only comparisons: the training size, and larger images where low precision pays on CPUs.
LARGE_IMAGE_SIZE = 128
SPEED_ROUNDS = {IMAGE_SIZE: 60, LARGE_IMAGE_SIZE: 5}
SPEED_WARMUP = 3

FLAGS = flags.FLAGS
flags.DEFINE_integer("steps", 1600, "Training steps of each run.", lower_bound=1)
flags.DEFINE_string("output_dir", os.path.join(REPO_ROOT, "runs", "demo"), "Where the runs go.")


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """One row of the comparison table."""

    precision: str
    final_loss: float
    accuracy: float
    images_per_second: float
    placement_note: str = ""


def _placement_note(report_path: str) -> str:
    """What the measured placement kept in float32, from the rewrite report ("" for a static placement)."""
    schema = {"reports": ListOf({"precision": str, "placement": MaybeMissing((dict, type(None)))})}
    (report,) = read_json_file(report_path, schema)["reports"]
    plan = report.get("placement")
    if not plan:
        return ""
    kept, low = len(plan["float32_ops"]), len(plan["low_ops"])
    return f"measured placement: {low} of {kept + low} conv/matmul ops in {report['precision']}, {kept} kept float32"


def run_one(precision: str, steps: int, output_dir: str) -> RunSummary:
    """Train from scratch in ``precision``, evaluate on the test split, return the table row."""
    train_dir = os.path.join(output_dir, precision)
    shutil.rmtree(train_dir, ignore_errors=True)
    print(f"\n== training {MODEL} in {precision} for {steps} steps -> {train_dir}", flush=True)
    config = TrainConfig(
        train_dir=train_dir,
        dataset_name="fashion_mnist",
        model_name=MODEL,
        preprocessing_name="cifarnet",
        train_image_size=IMAGE_SIZE,
        batch_size=BATCH_SIZE,
        max_number_of_steps=steps,
        log_every_n_steps=50,
        save_summaries_secs=30,
        num_preprocessing_threads=2,
        weight_decay=1e-4,
        seed=SEED,
        optimizer_settings=OptimizerSettings(optimizer="momentum", momentum=0.9),
        # One linear decay over the whole run: the weights settle at the end, so batch norm's moving
        # statistics (decay 0.997) catch up with them before evaluation.
        learning_rate_settings=LearningRateSettings(
            learning_rate_decay_type="polynomial", learning_rate=0.05, end_learning_rate=0.0005,
            num_epochs_per_decay=steps * BATCH_SIZE / get_dataset("fashion_mnist", "train").num_samples,
        ),
        precision_options=PrecisionOptions(
            precision=precision,
            mp_report=None if precision == "float32" else os.path.join(output_dir, f"rewrite_{precision}.json"),
        ),
    )
    result = train(config, print_line=lambda line: print(line, flush=True))
    metrics = evaluate(
        EvalConfig(
            checkpoint_path=train_dir,
            eval_dir=os.path.join(train_dir, "eval"),
            dataset_name="fashion_mnist",
            model_name=MODEL,
            preprocessing_name="cifarnet",
            eval_image_size=IMAGE_SIZE,
            batch_size=200,
            num_preprocessing_threads=2,
            precision_options=PrecisionOptions(precision=precision),
        ),
        print_line=lambda line: print(f"eval: {line}", flush=True),
    )
    note = "" if precision == "float32" else _placement_note(config.precision_options.mp_report)
    return RunSummary(precision, result.loss, metrics["accuracy"], result.images_per_second or 0.0, note)


def run_in_fresh_process(precision: str, steps: int, output_dir: str) -> RunSummary:
    """``run_one`` in a child process of its own.

    Training throughput drifts down over successive runs in one process (four 400-step runs in a
    row: 759, 720, 675, 697 images/s), which would favour whichever precision trains first.
    """
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(run_one, (precision, steps, output_dir))


def format_table(rows: List[RunSummary], speedup: float, rounds: int) -> str:
    """The comparison table; the mixed-precision speed-up is ``speedup``, timed interleaved at the training size."""
    lines = [f"{'precision':<10} {'final loss':>10} {'top-1':>7} {'images/s':>9} {'speed-up':>8}"]
    for row, row_speedup in zip(rows, (1.0, speedup)):
        lines.append(
            f"{row.precision:<10} {row.final_loss:>10.4f} {row.accuracy:>7.4f} "
            f"{row.images_per_second:>9.1f} {row_speedup:>7.2f}x"
        )
    lines.extend(f"  ({row.precision}: {row.placement_note})" for row in rows if row.placement_note)
    lines.append(f"  (speed-up: float32 and {rows[1].precision} train steps with the trained placement, timed "
                 f"interleaved at {IMAGE_SIZE}x{IMAGE_SIZE}, median of {rounds} step-by-step ratios; images/s come "
                 "from the two training runs, one after the other, so load on the machine can tilt them)")
    return "\n".join(lines)


def interleaved_speedup(precision: str, image_size: int, rounds: int, decisions_file: Optional[str] = None) -> float:
    """float32's step time over mixed precision's (default placement) on ``image_size`` random images.

    Speed only: train steps on fixed random inputs, interleaved, so both see the same machine load;
    the median of the step-by-step ratios. ``decisions_file`` (a training run's ``placement.json``)
    pins the placement to the one that run trained with.
    """
    print(f"\n== speed only: {MODEL} at {image_size}x{image_size}, batch {BATCH_SIZE}, {rounds} steps each", flush=True)
    options = PlacementOptions(decisions_file=decisions_file, write_decisions=False) if decisions_file else None
    steps = {config: benchmark_step.build_benchmark_step(config, MODEL, tf.as_dtype(precision), BATCH_SIZE,
                                                          image_size, num_classes=10, seed=SEED,
                                                          placement_options=options)
             for config in ("float32", "slim_mp")}
    try:
        times = benchmark_step.interleaved_times(
            {config: step.session.make_callable(step.train_op) for config, step in steps.items()}, rounds,
            warmup=SPEED_WARMUP)
    finally:
        for step in steps.values():
            step.session.close()
    return benchmark_step.paired_ratio(times, "float32", "slim_mp")


def main() -> None:
    """Run both precisions and print the table."""
    steps, output_dir = FLAGS.steps, FLAGS.output_dir
    started = time.perf_counter()
    rows = [run_in_fresh_process(precision, steps, output_dir)
            for precision in ("float32", preferred_low_precision(detect_device()))]
    low = rows[1].precision
    # The bfloat16 run's measured placement (none with SLIM_MP_PLACEMENT=static: the speed step then measures).
    trained_placement = os.path.join(output_dir, low, DECISIONS_FILE_NAME)
    pinned = {IMAGE_SIZE: trained_placement} if os.path.exists(trained_placement) else {}
    speedups = {size: interleaved_speedup(low, size, rounds, pinned.get(size)) for size, rounds in SPEED_ROUNDS.items()}
    print(f"\n{MODEL} on fashion_mnist ({IMAGE_SIZE}x{IMAGE_SIZE}, batch {BATCH_SIZE}, {steps} steps, seed {SEED})")
    print(format_table(rows, speedups[IMAGE_SIZE], SPEED_ROUNDS[IMAGE_SIZE]))
    print(f"at {LARGE_IMAGE_SIZE}x{LARGE_IMAGE_SIZE} (speed only, {SPEED_ROUNDS[LARGE_IMAGE_SIZE]} interleaved steps "
          f"each): {low} runs at {speedups[LARGE_IMAGE_SIZE]:.2f}x float32's speed, where low precision pays")
    print(f"outputs under {output_dir}; wall time {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    cli.run(main)
