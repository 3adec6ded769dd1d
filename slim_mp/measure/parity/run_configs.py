"""A run of the accuracy tools as training sees it: its ``TrainConfig`` and ``EvalConfig``, the shared initial weights.

Every run of a comparison trains with momentum 0.9 and a learning rate falling linearly to 1% over
the run, so the weights (and batch norm's moving statistics) settle before evaluation; only the
precision, seed, steps and folders vary. Mixed-precision runs take ``--placement`` (unset:
training's default) and are evaluated in their own precision.
"""

from typing import Callable, Dict, Optional, Sequence, Tuple

from slim_mp.datasets import DatasetSpec
from slim_mp.graph_pass import RewriteReport
from slim_mp.measure.parity.run_settings import REFERENCE_PRECISION, RunSettings
from slim_mp.training import (EvalConfig, LearningRateSettings, OptimizerSettings, PrecisionOptions, TrainConfig,
                              evaluate, train)

END_LEARNING_RATE_FRACTION = 0.01
MOMENTUM = 0.9
EVAL_BATCH_SIZE = 100
PREPROCESSING_THREADS = 2
MS_PER_SECOND = 1000.0  # slim_mp.timing measures milliseconds; runs are reported in seconds

PrintLine = Callable[[str], None]


def run_precision_options(settings: RunSettings, precision: str) -> PrecisionOptions:
    """``precision`` with ``settings.placement`` (unset: training's default)."""
    if precision == REFERENCE_PRECISION:
        return PrecisionOptions(precision=precision)
    placement = {} if settings.placement is None else {"mp_placement": settings.placement}
    return PrecisionOptions(precision=precision, **placement)


def lowered_allow_ops(reports: Sequence[RewriteReport]) -> Tuple[int, int]:
    """(allow-list ops the pass ran low, allow-list ops it saw), summed over a run's rewrite reports.

    The allow list is the conv/matmul class; ``reports`` are the run's (``TrainResult.rewrite_reports``).
    """
    counts = [count for report in reports for count in report.class_counts.get("allow", {}).values()]
    return sum(converted for converted, _ in counts), sum(seen for _, seen in counts)


def run_train_config(settings: RunSettings, train_set: DatasetSpec, seed: int, precision: str, train_dir: str,
                     steps: int, initial_checkpoint: Optional[str]) -> TrainConfig:
    """The training options of one run; the learning rate schedule spans ``settings.steps`` whatever ``steps`` is."""
    return TrainConfig(
        train_dir=train_dir,
        dataset_name=settings.dataset_name,
        dataset_dir=settings.dataset_dir,
        model_name=settings.model_name,
        preprocessing_name=settings.preprocessing_name,
        train_image_size=settings.image_size,
        batch_size=settings.batch_size,
        max_number_of_steps=steps,
        log_every_n_steps=settings.log_every_n_steps,
        num_preprocessing_threads=PREPROCESSING_THREADS,
        checkpoint_path=initial_checkpoint,
        seed=seed,
        optimizer_settings=OptimizerSettings(optimizer="momentum", momentum=MOMENTUM),
        learning_rate_settings=LearningRateSettings(
            learning_rate_decay_type="polynomial",
            learning_rate=settings.learning_rate,
            end_learning_rate=settings.learning_rate * END_LEARNING_RATE_FRACTION,
            num_epochs_per_decay=settings.steps * settings.batch_size / train_set.num_samples,
        ),
        precision_options=run_precision_options(settings, precision),
        batch_norm_decay=settings.effective_batch_norm_decay,
    )


def write_initial_checkpoint(settings: RunSettings, train_set: DatasetSpec, seed: int, folder: str) -> str:
    """Initialise the model with ``seed`` in float32 and save it untrained (step 0) in ``folder``; return it."""
    result = train(run_train_config(settings, train_set, seed, REFERENCE_PRECISION, folder, 0, None),
                   print_line=lambda line: None)
    return result.checkpoint


def evaluate_run(settings: RunSettings, checkpoint: str, eval_dir: str, split_name: str, precision: str,
                 print_line: PrintLine) -> Dict[str, object]:
    """Top-1, top-5 and loss of ``checkpoint`` on ``split_name``, evaluated in ``precision``."""
    return evaluate(
        EvalConfig(
            checkpoint_path=checkpoint,
            eval_dir=eval_dir,
            dataset_name=settings.dataset_name,
            dataset_split_name=split_name,
            dataset_dir=settings.dataset_dir,
            model_name=settings.model_name,
            preprocessing_name=settings.preprocessing_name,
            eval_image_size=settings.image_size,
            batch_size=EVAL_BATCH_SIZE,
            num_preprocessing_threads=PREPROCESSING_THREADS,
            precision_options=run_precision_options(settings, precision),
        ),
        print_line=print_line,
    )
