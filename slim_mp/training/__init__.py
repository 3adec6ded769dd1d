"""The training application behind the scripts: config, flags, graph, session, checkpoints, evaluation.

The names other packages (export, measurement) use are exported here; they import them from
``slim_mp.training``. The scripts' flag parser stays the submodule ``slim_mp.training.cli``.
"""

from slim_mp.training.checkpoint_folder import resolve_checkpoint
from slim_mp.training.fine_tune_restore import fine_tune_init_fn
from slim_mp.training.evaluation import EvalConfig, evaluate
from slim_mp.training.learning_rate import LearningRateSettings
from slim_mp.training.live_graph import live_graph_def
from slim_mp.training.loop import train
from slim_mp.training.model_setup import check_model_name, input_size, prepare_output_dir
from slim_mp.training.optimizers import OptimizerSettings
from slim_mp.training.precision_flags import LossScaleOptions, PrecisionOptions, write_rewrite_reports
from slim_mp.training.scopes import parse_scopes
from slim_mp.training.train_config import TrainConfig, check_train_config
from slim_mp.training.train_graph import (add_classification_losses, build_train_graph, dataset_and_network,
                                          training_input_iterator)

__all__ = [
    "fine_tune_init_fn", "resolve_checkpoint", "EvalConfig", "evaluate", "LearningRateSettings", "live_graph_def",
    "train", "check_model_name", "input_size", "prepare_output_dir", "OptimizerSettings", "LossScaleOptions",
    "PrecisionOptions", "write_rewrite_reports", "parse_scopes", "TrainConfig", "check_train_config",
    "add_classification_losses", "build_train_graph", "dataset_and_network", "training_input_iterator",
]
