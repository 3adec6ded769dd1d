"""The settings every run of the accuracy tools shares, checked before any training starts: ``RunSettings``.

``ParityConfig`` (many seeds, three arms) and ``TimeToAccuracyConfig`` (one seed, two precisions
side by side) extend it. Every check raises one ``ValueError`` naming the flag at fault and what to
pass instead (the scripts print it as their ``error:`` line).

Batch norm: these runs are short by design. After n steps a moving average still holds decay^n of
its initial value (variance 1, mean 0): with MobileNet v1's official 0.9997, 84% after 600 steps.
Its depthwise layers' true output variances are small (0.002 to 0.05 measured at 32 px), so those
leftovers of 1 dominate, evaluation (which normalises with the moving averages) shrinks every
layer's signal, and it predicts one class (top-1 0.10) while training well. Unset,
``--batch_norm_decay`` is therefore the network's own decay lowered, where needed, so that at most
``BATCH_NORM_LEFTOVER`` (10^-4) of the initial values is left at the first evaluation (after
``--steps`` for parity, after ``--eval_every_n_steps`` for time to accuracy, which evaluates as it
goes): min(official, 10^(-4 / steps)), e.g. 0.9847 for 600 steps; from about 31k steps on
MobileNet's own 0.9997 is kept.
"""

import dataclasses
import math
from typing import Optional, Tuple

from nets import nets_factory
from slim_mp.config_fields import ArgumentError, argument, option
from slim_mp.datasets import DatasetSpec, get_dataset
from slim_mp.graph_pass import resolve_placement
from slim_mp.precision import precision_name
from slim_mp.training import StepSettings, check_batch_norm_decay, check_model_name

REFERENCE_PRECISION = "float32"
# The largest part of batch norm's initial moving averages a run may leave (see the module docstring).
BATCH_NORM_LEFTOVER = 1e-4
EVAL_SPLIT_CANDIDATES = ("test", "validation")

# An example value for each numeric flag, quoted in the error that rejects it.
FLAG_EXAMPLES = {"steps": 1000, "batch_size": 32, "log_every_n_steps": 100, "learning_rate": 0.01, "image_size": 28,
                 "equivalence_margin": 0.5, "eval_every_n_steps": 200, "chunk_steps": 50}


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """Model, data, the mixed precision, steps and hyper-parameters: what every run of a comparison shares."""

    model_name: str = option("lenet", "The network name (nets/nets_factory.py).")
    dataset_name: str = option(
        "fashion_mnist", "The dataset, e.g. fashion_mnist (the bundled 10k/2k subset), fashion_mnist_full (the full "
        "60k/10k from the Debian package dataset-fashion-mnist) or image_folder."
    )
    dataset_dir: Optional[str] = option(
        None, "The folder of the dataset's files (unset for the bundled fashion_mnist subset)."
    )
    precision: str = option("bfloat16", "The mixed precision: bfloat16 or float16.")
    steps: int = option(1000, "Training steps of every run.")
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
    batch_norm_decay: Optional[float] = option(
        None, "Decay of batch norm's moving averages; unset means the network's own, lowered where needed so that "
        f"at most {BATCH_NORM_LEFTOVER:g} of their initial values is left at the first evaluation (MobileNet's "
        "official 0.9997 evaluates at chance after short runs); none for networks without batch norm."
    )
    equivalence_margin: float = option(
        0.5, "Equivalence margin in percentage points of top-1: a gap is equivalent when its 95% interval lies "
        "inside +- this (two one-sided t tests at 2.5% each)."
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

    @property
    def steps_before_first_evaluation(self) -> int:
        """Train steps before the moving averages are first used: the whole run (a tool evaluating as it
        goes overrides it)."""
        return self.steps

    @property
    def effective_batch_norm_decay(self) -> Optional[float]:
        """``--batch_norm_decay``, or unset: min(the network's own, the decay leaving ``BATCH_NORM_LEFTOVER``
        after ``steps_before_first_evaluation``); None for a network without batch norm."""
        if self.batch_norm_decay is not None:
            return self.batch_norm_decay
        official = nets_factory.batch_norm_decay(self.model_name)
        if official is None:
            return None
        return min(official, BATCH_NORM_LEFTOVER ** (1 / self.steps_before_first_evaluation))


def check_positive(argument_name: str, value: float) -> None:
    """Raise ``ArgumentError`` naming the argument ``argument_name`` unless ``value`` is a finite positive number."""
    if not (math.isfinite(value) and value > 0):
        named = argument(argument_name)
        raise ArgumentError(f"{named}={value} must be a positive number; pass e.g. {named} "
                            f"{FLAG_EXAMPLES[argument_name]}.")


def run_step_settings(settings: RunSettings) -> StepSettings:
    """What sizes the train step of ``settings``'s runs, as its flags name it (for a step that runs out of memory)."""
    return StepSettings(settings.model_name, settings.batch_size, settings.precision, settings.image_size,
                        "image_size")


def eval_split(settings: RunSettings) -> str:
    """The split runs are evaluated on: ``--eval_split_name``, else the data set's test or validation split."""
    if settings.eval_split_name:
        try:
            get_dataset(settings.dataset_name, settings.eval_split_name, settings.dataset_dir)
        except ValueError as error:
            raise ValueError(f"--eval_split_name={settings.eval_split_name} is not a readable split of dataset "
                             f"'{settings.dataset_name}'; pass one it has, e.g. test or validation.") from error
        return settings.eval_split_name
    for split_name in EVAL_SPLIT_CANDIDATES:
        try:
            get_dataset(settings.dataset_name, split_name, settings.dataset_dir)
        except ValueError:
            continue
        return split_name
    raise ValueError(f"dataset '{settings.dataset_name}' has neither a test nor a validation split; "
                     "set --eval_split_name to the split to evaluate on.")


def check_run_settings(settings: RunSettings) -> Tuple[DatasetSpec, str]:
    """Raise ValueError naming the flag at fault; return the train set and the eval split."""
    check_model_name(settings.model_name)
    for flag in ("steps", "batch_size", "log_every_n_steps", "learning_rate", "equivalence_margin"):
        check_positive(flag, getattr(settings, flag))
    if settings.batch_norm_decay is not None:
        check_batch_norm_decay(settings.model_name, settings.batch_norm_decay)
    if settings.image_size is not None:
        check_positive("image_size", settings.image_size)
    return get_dataset(settings.dataset_name, "train", settings.dataset_dir), eval_split(settings)
