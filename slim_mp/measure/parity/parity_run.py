"""Accuracy parity: train one model in float32 and in mixed precision from the same initial weights, per seed.

For every seed a float32 checkpoint of freshly initialised weights is written once; both
precisions then fine-tune from it with the same seed (so the same batches in the same order),
the same steps and the same hyper-parameters, so precision is the only difference. The control
arm trains float32 once more from a copy of those weights perturbed by one part in a million
(``CONTROL_PERTURBATION``), far below bfloat16's rounding: how far float32 moves from itself. Every
step's loss, loss scale and skipped-step count is recorded through the training loop's
``on_step`` callback, and each run is evaluated on the held-out split.
"""

import dataclasses
import os
from typing import Dict

import numpy as np
import tensorflow as tf
from absl import logging

from slim_mp.datasets import DatasetSpec
from slim_mp.devices import device_type, emulation_warning
from slim_mp.measure.parity.parity_config import (CONTROL_ARM, CONTROL_PERTURBATION, ParityConfig,
                                                  check_parity_config, seed_dir)
from slim_mp.measure.parity.parity_results import ParityResult, RunRecord, StepLog, earlier_runs
from slim_mp.measure.parity.run_configs import (MS_PER_SECOND, PrintLine, evaluate_run, lowered_allow_ops,
                                                run_train_config, write_initial_checkpoint)
from slim_mp.measure.parity.run_settings import REFERENCE_PRECISION, run_step_settings
from slim_mp.training import out_of_memory_named, train
from slim_mp.timing import run_ms
from slim_mp.train_dir import write_scaled_checkpoint

# The control's perturbation is drawn with numpy seed CONTROL_SEED_OFFSET + seed.
CONTROL_SEED_OFFSET = 100


def perturbation_factors(checkpoint: str, seed: int) -> Dict[str, np.ndarray]:
    """Per floating-point tensor of ``checkpoint``: ``1 + CONTROL_PERTURBATION * N(0, 1)`` of its shape (seeded)."""
    reader = tf.train.load_checkpoint(checkpoint)
    dtypes = reader.get_variable_to_dtype_map()
    rng = np.random.default_rng(CONTROL_SEED_OFFSET + seed)
    return {name: 1 + CONTROL_PERTURBATION * rng.standard_normal(shape)
            for name, shape in sorted(reader.get_variable_to_shape_map().items()) if dtypes[name].is_floating}


def write_control_checkpoint(config: ParityConfig, seed: int, initial_checkpoint: str) -> str:
    """Write the control's start: ``initial_checkpoint`` with every float tensor perturbed; return the checkpoint."""
    return write_scaled_checkpoint(initial_checkpoint, os.path.join(seed_dir(config, seed), "initial_perturbed"),
                                   perturbation_factors(initial_checkpoint, seed))


def train_and_evaluate(config: ParityConfig, train_set: DatasetSpec, split_name: str, seed: int, arm: str,
                       initial_checkpoint: str, print_line: PrintLine) -> RunRecord:
    """Fine-tune ``arm`` from ``initial_checkpoint``, recording every step, then evaluate the result."""
    precision = REFERENCE_PRECISION if arm == CONTROL_ARM else arm
    train_dir = os.path.join(seed_dir(config, seed), arm)
    curves = StepLog()
    trained = {}
    train_ms = run_ms(lambda: trained.update(result=train(
        run_train_config(config, train_set, seed, precision, train_dir, config.steps, initial_checkpoint),
        print_line=lambda line: print_line(f"  {arm} seed {seed}: {line}"),
        on_step=curves.record,
    )))
    result = trained["result"]
    metrics = evaluate_run(config, result.checkpoint, os.path.join(train_dir, "eval"), split_name, precision,
                           print_line=lambda line: print_line(f"  {arm} seed {seed} eval: {line}"))
    low, seen = (None, None) if precision == REFERENCE_PRECISION else lowered_allow_ops(result.rewrite_reports)
    return RunRecord(
        arm=arm,
        seed=seed,
        final_loss=curves.loss[-1],
        accuracy=float(metrics["accuracy"]),
        eval_loss=float(metrics["loss"]),
        initial_checkpoint=initial_checkpoint,
        checkpoint=result.checkpoint,
        curves=curves,
        low_allow_ops=low,
        allow_ops=seen,
        train_seconds=train_ms / MS_PER_SECOND,
    )


def _warn_if_float16_on_cpu(config: ParityConfig) -> None:
    """Log a warning when float16 is asked for on a machine without a GPU: CPU float16 kernels are slow."""
    emulated = emulation_warning(config.precision, device_type())
    if emulated:
        logging.warning("--precision=%s: %s Expect long runs.", config.precision, emulated)


def run_parity(config: ParityConfig, print_line: PrintLine = print) -> ParityResult:
    """Check ``config``, then train and evaluate every arm for every seed (seed-major order).

    An earlier comparison in ``config.output_dir`` (same flags but ``--seeds``) keeps its runs: the
    result holds its seeds, then these.
    """
    train_set, split_name = check_parity_config(config)
    runs = earlier_runs(config, split_name)
    _warn_if_float16_on_cpu(config)
    with out_of_memory_named(run_step_settings(config)):
        for index, seed in enumerate(config.seeds, start=1):
            initial_checkpoint = write_initial_checkpoint(config, train_set, seed,
                                                          os.path.join(seed_dir(config, seed), "initial"))
            print_line(f"seed {seed} ({index}/{len(config.seeds)}): initial float32 weights in {initial_checkpoint}")
            for arm in config.arms:
                start = write_control_checkpoint(config, seed, initial_checkpoint) if arm == CONTROL_ARM else None
                print_line(f"seed {seed} ({index}/{len(config.seeds)}): training {config.model_name} as {arm} "
                           f"for {config.steps} steps")
                runs.append(train_and_evaluate(config, train_set, split_name, seed, arm, start or initial_checkpoint,
                                               print_line))
    all_seeds = tuple(dict.fromkeys(run.seed for run in runs))
    return ParityResult(dataclasses.replace(config, seeds=all_seeds), split_name, runs)
