"""Accuracy parity: train one model in float32 and in mixed precision from the same initial weights, per seed.

For every seed a float32 checkpoint of freshly initialised weights is written once; both
precisions then fine-tune from it with the same seed (so the same batches in the same order),
the same steps and the same hyper-parameters, so precision is the only difference. Every
step's loss, loss scale and skipped-step count is recorded through the training loop's
``on_step`` callback, and each run is evaluated on the held-out split.
"""

import dataclasses
import math
import os
from typing import Callable, Dict, List, Optional, Tuple

from absl import logging

from slim_mp.config_fields import option
from slim_mp.datasets import DatasetSpec, get_dataset
from slim_mp.devices import device_type, emulation_warning
from slim_mp.precision import precision_name
from slim_mp.training import (EvalConfig, LearningRateSettings, OptimizerSettings, PrecisionOptions, TrainConfig,
                              check_model_name, evaluate, prepare_output_dir, train)

REFERENCE_PRECISION = "float32"
EVAL_SPLIT_CANDIDATES = ("test", "validation")
END_LEARNING_RATE_FRACTION = 0.01
MOMENTUM = 0.9
EVAL_BATCH_SIZE = 100
PREPROCESSING_THREADS = 2

PrintLine = Callable[[str], None]

# An example value for each numeric flag, quoted in the error that rejects it.
FLAG_EXAMPLES = {"steps": 1000, "batch_size": 32, "log_every_n_steps": 100, "learning_rate": 0.01, "image_size": 28}


@dataclasses.dataclass(frozen=True)
class ParityConfig:
    """What to compare: model, data, the mixed precision, steps, seeds and where the results go."""

    model_name: str = option("lenet", "The network name (nets/nets_factory.py).")
    dataset_name: str = option("fashion_mnist", "The dataset, e.g. fashion_mnist or image_folder.")
    dataset_dir: Optional[str] = option(
        None, "The folder of the dataset's files (unset for the bundled fashion_mnist subset)."
    )
    precision: str = option("bfloat16", "The mixed precision: bfloat16 or float16.")
    steps: int = option(1000, "Training steps of every run.")
    seeds: Tuple[int, ...] = option((0, 1, 2), "Comma-separated seeds, e.g. 0,1,2.")
    output_dir: str = option("runs/parity", "Where results and runs are written.")
    batch_size: int = option(32, "Images per training step.")
    image_size: Optional[int] = option(None, "Train and eval image size; unset means the network's default.")
    learning_rate: float = option(0.01, "Initial learning rate (momentum 0.9, linear decay to 1% over the run).")
    log_every_n_steps: int = option(100, "Print a progress line every this many steps.")
    preprocessing_name: Optional[str] = option(None, "The preprocessing; unset means the network's own.")
    eval_split_name: Optional[str] = option(None, "Split to evaluate on; unset means test, else validation.")

    def __post_init__(self) -> None:
        try:
            canonical = precision_name(self.precision)
        except ValueError as error:
            raise ValueError(f"--precision={self.precision!r}: {error} (the float32 reference runs are always "
                             "made).") from error
        object.__setattr__(self, "precision", canonical)

    @property
    def precisions(self) -> Tuple[str, str]:
        """The reference and the compared precision, in the order they are trained."""
        return REFERENCE_PRECISION, self.precision


@dataclasses.dataclass
class StepLog:
    """What every train step of one run reported: global step, loss, loss scale and skipped-step count after it.

    A step skipped for non-finite float16 gradients is recorded too: it raises ``skipped`` and
    leaves the global step where it was, so a run has ``steps + skipped`` entries.
    """

    step: List[int] = dataclasses.field(default_factory=list)
    loss: List[float] = dataclasses.field(default_factory=list)
    loss_scale: List[float] = dataclasses.field(default_factory=list)
    skipped: List[int] = dataclasses.field(default_factory=list)

    def record(self, values: Dict[str, float]) -> None:
        """Append one step's progress values (the training loop's ``on_step`` callback)."""
        self.step.append(int(values["step"]))
        self.loss.append(float(values["loss"]))
        self.loss_scale.append(float(values["loss_scale"]))
        self.skipped.append(int(values["skipped"]))

    def applied(self) -> Tuple[List[int], List[float]]:
        """Global step and loss of the steps whose update was applied (one per global step, skipped ones left out)."""
        steps, losses, skipped_before = [], [], 0
        for step, loss, skipped in zip(self.step, self.loss, self.skipped):
            if skipped == skipped_before:
                steps.append(step)
                losses.append(loss)
            skipped_before = skipped
        return steps, losses


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """One trained and evaluated run: its precision and seed, end results, and per-step curves."""

    precision: str
    seed: int
    final_loss: float
    accuracy: float
    eval_loss: float
    initial_checkpoint: str
    checkpoint: str
    curves: StepLog

    @property
    def skipped_steps(self) -> int:
        """Steps whose update was skipped for non-finite gradients (the counter's value after the last step)."""
        return self.curves.skipped[-1]


@dataclasses.dataclass(frozen=True)
class ParityResult:
    """A finished comparison: its options, the split it was evaluated on, and every run (seed-major)."""

    config: ParityConfig
    eval_split: str
    runs: List[RunRecord]

    def runs_of(self, precision: str) -> List[RunRecord]:
        """The runs of one precision, in seed order."""
        return [run for run in self.runs if run.precision == precision]


def _check_positive(flag: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"--{flag}={value} must be a positive number; pass e.g. --{flag} {FLAG_EXAMPLES[flag]}.")


def _check_seeds(seeds: Tuple[int, ...]) -> None:
    if not seeds:
        raise ValueError("--seeds is empty; pass one or more comma-separated seeds such as --seeds 0,1,2.")
    if len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ValueError(f"--seeds={','.join(map(str, seeds))} must be distinct non-negative integers; "
                         "pass e.g. --seeds 0,1,2.")


def seed_dir(config: ParityConfig, seed: int) -> str:
    """The folder of one seed's initial checkpoint and runs."""
    return os.path.join(config.output_dir, f"seed_{seed}")


def eval_split(config: ParityConfig) -> str:
    """The split runs are evaluated on: ``--eval_split_name``, else the data set's test or validation split."""
    if config.eval_split_name:
        try:
            get_dataset(config.dataset_name, config.eval_split_name, config.dataset_dir)
        except ValueError as error:
            raise ValueError(f"--eval_split_name={config.eval_split_name} is not a readable split of dataset "
                             f"'{config.dataset_name}'; pass one it has, e.g. test or validation.") from error
        return config.eval_split_name
    for split_name in EVAL_SPLIT_CANDIDATES:
        try:
            get_dataset(config.dataset_name, split_name, config.dataset_dir)
        except ValueError:
            continue
        return split_name
    raise ValueError(f"dataset '{config.dataset_name}' has neither a test nor a validation split; "
                     "set --eval_split_name to the split to evaluate on.")


def check_parity_config(config: ParityConfig) -> Tuple[DatasetSpec, str]:
    """Raise ValueError naming the flag at fault before any training starts; return the train set and eval split."""
    check_model_name(config.model_name)
    for flag in ("steps", "batch_size", "log_every_n_steps", "learning_rate"):
        _check_positive(flag, getattr(config, flag))
    if config.image_size is not None:
        _check_positive("image_size", config.image_size)
    _check_seeds(config.seeds)
    train_set = get_dataset(config.dataset_name, "train", config.dataset_dir)
    split_name = eval_split(config)
    prepare_output_dir(config.output_dir, "--output_dir")
    for seed in config.seeds:
        if os.path.exists(seed_dir(config, seed)):
            raise ValueError(f"--output_dir={config.output_dir} already holds {seed_dir(config, seed)} from an "
                             "earlier comparison; pass a new --output_dir or delete that folder.")
    return train_set, split_name


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
        precision_options=PrecisionOptions(precision=precision),
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
            precision_options=PrecisionOptions(precision=precision),
        ),
        print_line=lambda line: print_line(f"  {precision} seed {seed} eval: {line}"),
    )
    return RunRecord(
        precision=precision,
        seed=seed,
        final_loss=curves.loss[-1],
        accuracy=float(metrics["accuracy"]),
        eval_loss=float(metrics["loss"]),
        initial_checkpoint=initial_checkpoint,
        checkpoint=result.checkpoint,
        curves=curves,
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
