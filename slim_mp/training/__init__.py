"""The training application behind the scripts: config, flags, graph, session, checkpoints, evaluation.

The modules, in the order a run's data flows through them:

- flags and config: ``cli`` (the scripts' flag parser and error reporting), ``train_config``
  (``TrainConfig``), ``data_model_options`` and ``precision_flags`` (the options training and
  evaluation share), ``learning_rate``, ``optimizers`` and ``scopes`` (the knobs they name);
- the scripts' screen: ``library_logs`` (TensorFlow's and absl's lines to a log file);
- data: ``input_pipeline`` (tf.data, decoded, preprocessed and batched);
- model: ``model_setup`` (network, preprocessing, input size, output folders);
- graph: ``fault_injection`` (test-only inf gradients), ``fine_tune_restore`` (the pretrained
  variables' restore op), ``memory_fit`` (will the step fit this process's memory; out of memory as one
  sentence), ``train_graph`` (clones, losses, optimizer, mixed precision) and
  ``live_graph`` (what the rewrite left live, for TensorBoard and ``.meta`` files);
- session: ``session_start`` (the chief restores or initialises, the other workers wait);
- loop: ``loop`` (resume, run the watched steps), ``step_schedule`` (when it summarises, logs and
  saves) and ``stop_saves`` (the save when Ctrl-C, SIGTERM or broken input data stops it), in the
  train dir's room (``slim_mp.train_dir``: its lock, disk errors, atomic saves and the survey);
- checkpoints and this model: ``checkpoint_fit`` (does it fit this model), ``checkpoint_read`` (an
  evaluation's one read, safe from a trainer's rotation);
- evaluation: ``evaluation`` (top-1, top-5 and loss over a whole split), ``served_names`` (the input and
  output names of every export, and the ``.tflite`` suffix) and ``tflite_interpreter`` (a TensorFlow Lite
  model run by LiteRT, which evaluation runs in place of the network).

The names other packages (export, measurement) use are exported here; they import them from
``slim_mp.training``, never a module inside it (``tests/test_architecture.py`` seals it). The scripts'
flag parser stays the submodule ``slim_mp.training.cli``, which only the scripts import.
"""

from slim_mp.training.fine_tune_restore import fine_tune_init_fn
from slim_mp.training.evaluation import EvalConfig, evaluate
from slim_mp.training.learning_rate import LearningRateSettings
from slim_mp.training.library_logs import send_library_logs_to
from slim_mp.training.live_graph import live_graph_def, reachable_graph_def
from slim_mp.training.loop import train
from slim_mp.training.memory_fit import StepSettings, out_of_memory_named
from slim_mp.training.input_pipeline import SHUFFLE_BUFFER_IMAGES, InputOptions, make_dataset
from slim_mp.training.model_setup import (check_batch_norm_decay, check_model_name, input_size,
                                          network_and_preprocessing, prepare_output_dir)
from slim_mp.training.optimizers import OptimizerSettings
from slim_mp.training.precision_flags import LossScaleOptions, PrecisionOptions, write_rewrite_reports
from slim_mp.training.scopes import parse_scopes
from slim_mp.training.served_names import INPUT_NAME, OUTPUT_NAMES, TFLITE_SUFFIX, is_tflite_path
from slim_mp.training.tflite_interpreter import TFLiteModel, load_tflite_model
from slim_mp.training.session_start import TrainingSession, start_session
from slim_mp.training.train_config import TrainConfig, check_train_config, cluster_layout, train_step_settings
from slim_mp.training.train_graph import (TrainGraph, add_classification_losses, build_train_graph,
                                          dataset_and_network, training_input_iterator)

__all__ = [
    "fine_tune_init_fn", "EvalConfig", "evaluate", "LearningRateSettings", "send_library_logs_to", "live_graph_def",
    "reachable_graph_def", "train", "StepSettings", "out_of_memory_named", "check_batch_norm_decay",
    "check_model_name", "input_size", "prepare_output_dir", "OptimizerSettings", "LossScaleOptions",
    "PrecisionOptions", "write_rewrite_reports", "parse_scopes", "TrainingSession", "start_session", "TrainConfig",
    "check_train_config", "cluster_layout", "train_step_settings", "TrainGraph", "add_classification_losses",
    "build_train_graph", "dataset_and_network", "training_input_iterator",
    "INPUT_NAME", "OUTPUT_NAMES", "TFLITE_SUFFIX", "is_tflite_path", "TFLiteModel", "load_tflite_model",
    "SHUFFLE_BUFFER_IMAGES", "InputOptions", "make_dataset", "network_and_preprocessing",
]
