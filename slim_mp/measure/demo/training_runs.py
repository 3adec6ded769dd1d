"""The demo's two training runs, float32 and mixed precision, each from scratch in a fresh process; the table.

Each run trains the same number of steps with one linear learning-rate decay over the run, then is
evaluated on the test split. A run takes its own process because training throughput drifts down
over successive runs in one process (four 400-step runs in a row: 759, 720, 675, 697 images/s),
which would favour whichever precision trains first.
"""

import dataclasses
import multiprocessing
import os
import shutil
import time
from typing import Callable, List, Optional

from slim_mp.datasets import get_dataset
from slim_mp.graph_pass import DECISIONS_FILE_NAME
from slim_mp.measure.demo.workload import (BATCH_SIZE, DATASET, EVAL_BATCH_SIZE, IMAGE_SIZE, LOG_FILE_NAME, MODEL,
                                           PREPROCESSING, SEED)
from slim_mp.training import (EvalConfig, LearningRateSettings, OptimizerSettings, PrecisionOptions, TrainConfig,
                              evaluate, send_library_logs_to, train)


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """One training run's row of the table."""

    precision: str
    final_loss: float
    accuracy: float
    images_per_second: float


def say(line: str) -> None:
    """Print one of the demo's own lines at once (the training runs' processes share the terminal)."""
    print(line, flush=True)


def _progress_printer(precision: str, steps: int) -> Callable[[str], None]:
    """Print the training loop's progress lines prefixed with the precision and followed by an ETA."""
    started = time.monotonic()

    def print_line(line: str) -> None:
        step = int(line.split()[0].split("=")[1])
        remaining = (time.monotonic() - started) / max(step, 1) * (steps - step)
        say(f"  {precision:<8} {line} eta={remaining:.0f}s")

    return print_line


def train_one_precision(precision: str, steps: int, output_dir: str, decisions_file: Optional[str]) -> RunSummary:
    """Train from scratch in ``precision`` (pinned to ``decisions_file``'s placement), evaluate; the table's row."""
    send_library_logs_to(os.path.join(output_dir, LOG_FILE_NAME))
    train_dir = os.path.join(output_dir, precision)
    shutil.rmtree(train_dir, ignore_errors=True)
    if decisions_file:
        os.makedirs(train_dir)
        shutil.copyfile(decisions_file, os.path.join(train_dir, DECISIONS_FILE_NAME))
    num_samples = get_dataset(DATASET, "train").num_samples
    config = TrainConfig(
        train_dir=train_dir, dataset_name=DATASET, model_name=MODEL, preprocessing_name=PREPROCESSING,
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
                   model_name=MODEL, preprocessing_name=PREPROCESSING, eval_image_size=IMAGE_SIZE,
                   batch_size=EVAL_BATCH_SIZE, num_preprocessing_threads=2,
                   precision_options=PrecisionOptions(precision=precision)),
        print_line=lambda line: None,
    )
    say(f"  {precision:<8} top-1 {metrics['accuracy']:.4f} on the {DATASET} test split")
    return RunSummary(precision, result.loss, metrics["accuracy"], result.images_per_second or 0.0)


def train_in_fresh_process(precision: str, steps: int, output_dir: str, decisions_file: Optional[str]) -> RunSummary:
    """``train_one_precision`` in a child process of its own (spawned: a fork would inherit TensorFlow's threads)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(train_one_precision, (precision, steps, output_dir, decisions_file))


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
