"""What a parity comparison runs, checked before any training starts: ``ParityConfig`` and its checks.

Every check raises one ``ValueError`` naming the flag at fault and what to pass instead (the script
prints it as its ``error:`` line): the config's own fields in ``__post_init__``, the data set,
splits and output folder in ``check_parity_config``.
"""

import dataclasses
import math
import os
from typing import Optional, Tuple

from slim_mp.config_fields import option
from slim_mp.datasets import DatasetSpec, get_dataset
from slim_mp.graph_pass import resolve_placement
from slim_mp.precision import precision_name
from slim_mp.training import check_model_name, prepare_output_dir

REFERENCE_PRECISION = "float32"
EVAL_SPLIT_CANDIDATES = ("test", "validation")

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
    placement: Optional[str] = option(
        None, "Where the mixed-precision runs put ops low: measured or static; unset means training's default "
        "(--mp_placement's)."
    )

    def __post_init__(self) -> None:
        try:
            canonical = precision_name(self.precision)
        except ValueError as error:
            raise ValueError(f"--precision={self.precision!r}: {error} (the float32 reference runs are always "
                             "made).") from error
        object.__setattr__(self, "precision", canonical)
        if self.placement is not None:
            try:
                resolve_placement(self.placement)
            except ValueError as error:
                raise ValueError(f"--placement={self.placement!r}: {error}") from error

    @property
    def precisions(self) -> Tuple[str, str]:
        """The reference and the compared precision, in the order they are trained."""
        return REFERENCE_PRECISION, self.precision


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
