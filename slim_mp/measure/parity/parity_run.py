"""Accuracy parity: train one model in float32 and in mixed precision from the same initial weights, per seed.

For every seed a float32 checkpoint of freshly initialised weights is written once; both
precisions then fine-tune from it with the same seed (so the same batches in the same order),
the same steps and the same hyper-parameters, so precision is the only difference. Every
step's loss, loss scale and skipped-step count is recorded through the training loop's
``on_step`` callback, and each run is evaluated on the held-out split.
"""

import os
from typing import Callable, Optional, Sequence, Tuple

from absl import logging

from slim_mp.datasets import DatasetSpec
from slim_mp.devices import device_type, emulation_warning
from slim_mp.graph_pass import RewriteReport
from slim_mp.measure.parity.parity_config import REFERENCE_PRECISION, ParityConfig, check_parity_config, seed_dir
from slim_mp.measure.parity.parity_results import ParityResult, RunRecord, StepLog
from slim_mp.training import (EvalConfig, LearningRateSettings, OptimizerSettings, PrecisionOptions, TrainConfig,
                              evaluate, train)

END_LEARNING_RATE_FRACTION = 0.01
MOMENTUM = 0.9
EVAL_BATCH_SIZE = 100
PREPROCESSING_THREADS = 2

PrintLine = Callable[[str], None]


def _precision_options(config: ParityConfig, precision: str) -> PrecisionOptions:
    """``precision`` with ``config.placement`` (unset: training's default)."""
    if precision == REFERENCE_PRECISION:
        return PrecisionOptions(precision=precision)
    placement = {} if config.placement is None else {"mp_placement": config.placement}
    return PrecisionOptions(precision=precision, **placement)


def lowered_allow_ops(reports: Sequence[RewriteReport]) -> Tuple[int, int]:
    """(allow-list ops the pass ran low, allow-list ops it saw), summed over a run's rewrite reports.

    The allow list is the conv/matmul class; ``reports`` are the run's (``TrainResult.rewrite_reports``).
    """
    counts = [count for report in reports for count in report.class_counts.get("allow", {}).values()]
    return sum(converted for converted, _ in counts), sum(seen for _, seen in counts)


def _train_config(config: ParityConfig, train_set: DatasetSpec, seed: int, precision: str, train_dir: str,
                  steps: int, initial_checkpoint: Optional[str]) -> TrainConfig:
    """The training options shared by every run; only precision, steps, seed and folders vary.

    The learning rate falls linearly to 1% over ``config.steps``, so the weights (and batch norm's
    moving statistics) settle before evaluation.
    """
    return TrainConfig(
        train_dir=train_dir,
        dataset_name=config.dataset_name,
        dataset_dir=config.dataset_dir,
        model_name=config.model_name,
        preprocessing_name=config.preprocessing_name,
        train_image_size=config.image_size,
        batch_size=config.batch_size,
        max_number_of_steps=steps,
        log_every_n_steps=config.log_every_n_steps,
        num_preprocessing_threads=PREPROCESSING_THREADS,
        checkpoint_path=initial_checkpoint,
        seed=seed,
        optimizer_settings=OptimizerSettings(optimizer="momentum", momentum=MOMENTUM),
        learning_rate_settings=LearningRateSettings(
            learning_rate_decay_type="polynomial",
            learning_rate=config.learning_rate,
            end_learning_rate=config.learning_rate * END_LEARNING_RATE_FRACTION,
            num_epochs_per_decay=config.steps * config.batch_size / train_set.num_samples,
        ),
        precision_options=_precision_options(config, precision),
    )


def write_initial_checkpoint(config: ParityConfig, train_set: DatasetSpec, seed: int) -> str:
    """Initialise the model with ``seed`` in float32 and save it untrained (step 0); return the checkpoint."""
    init_dir = os.path.join(seed_dir(config, seed), "initial")
    result = train(_train_config(config, train_set, seed, REFERENCE_PRECISION, init_dir, 0, None),
                   print_line=lambda line: None)
    return result.checkpoint


def train_and_evaluate(config: ParityConfig, train_set: DatasetSpec, split_name: str, seed: int, precision: str,
                       initial_checkpoint: str, print_line: PrintLine) -> RunRecord:
    """Fine-tune from ``initial_checkpoint`` in ``precision``, recording every step, then evaluate the result."""
    train_dir = os.path.join(seed_dir(config, seed), precision)
    curves = StepLog()
    result = train(
        _train_config(config, train_set, seed, precision, train_dir, config.steps, initial_checkpoint),
        print_line=lambda line: print_line(f"  {precision} seed {seed}: {line}"),
        on_step=curves.record,
    )
    metrics = evaluate(
        EvalConfig(
            checkpoint_path=result.checkpoint,
            eval_dir=os.path.join(train_dir, "eval"),
            dataset_name=config.dataset_name,
            dataset_split_name=split_name,
            dataset_dir=config.dataset_dir,
            model_name=config.model_name,
            preprocessing_name=config.preprocessing_name,
            eval_image_size=config.image_size,
            batch_size=EVAL_BATCH_SIZE,
            num_preprocessing_threads=PREPROCESSING_THREADS,
            precision_options=_precision_options(config, precision),
        ),
        print_line=lambda line: print_line(f"  {precision} seed {seed} eval: {line}"),
    )
    low, seen = (None, None) if precision == REFERENCE_PRECISION else lowered_allow_ops(result.rewrite_reports)
    return RunRecord(
        precision=precision,
        seed=seed,
        final_loss=curves.loss[-1],
        accuracy=float(metrics["accuracy"]),
        eval_loss=float(metrics["loss"]),
        initial_checkpoint=initial_checkpoint,
        checkpoint=result.checkpoint,
        curves=curves,
        low_allow_ops=low,
        allow_ops=seen,
    )


def _warn_if_float16_on_cpu(config: ParityConfig) -> None:
    """Log a warning when float16 is asked for on a machine without a GPU: CPU float16 kernels are slow."""
    emulated = emulation_warning(config.precision, device_type())
    if emulated:
        logging.warning("--precision=%s: %s Expect long runs.", config.precision, emulated)


def run_parity(config: ParityConfig, print_line: PrintLine = print) -> ParityResult:
    """Check ``config``, then train and evaluate both precisions for every seed (seed-major order)."""
    train_set, split_name = check_parity_config(config)
    _warn_if_float16_on_cpu(config)
    runs = []
    for index, seed in enumerate(config.seeds, start=1):
        initial_checkpoint = write_initial_checkpoint(config, train_set, seed)
        print_line(f"seed {seed} ({index}/{len(config.seeds)}): initial float32 weights in {initial_checkpoint}")
        for precision in config.precisions:
            print_line(f"seed {seed} ({index}/{len(config.seeds)}): training {config.model_name} in {precision} "
                       f"for {config.steps} steps")
            runs.append(train_and_evaluate(config, train_set, split_name, seed, precision, initial_checkpoint,
                                           print_line))
    return ParityResult(config, split_name, runs)
