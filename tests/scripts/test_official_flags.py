"""Every flag of the official TF-Slim scripts, with its official type and default, in our three scripts.

The tables are facts read from tensorflow/models ``research/slim`` (``train_image_classifier.py``,
``eval_image_classifier.py``, ``export_inference_graph.py``): flag name, ``DEFINE_*`` kind, default.
The fast check reads the config dataclasses the scripts define their flags from; the slow one loads
each script in its own interpreter (the scripts define flags of the same name with other defaults),
which prints the absl flags it defined.
"""

import dataclasses
import json
import os
import subprocess
import sys
import typing

import pytest

from script_runs import EVAL_SCRIPT, REPO_ROOT, TRAIN_SCRIPT, check_bad_input, run_script, script_env
from slim_mp.export.inference_graph import ExportConfig
from slim_mp.training.evaluation import EvalConfig
from slim_mp.training.train_config import TrainConfig

EXPORT_SCRIPT = os.path.join(REPO_ROOT, "scripts", "export_inference_graph.py")

OFFICIAL_TRAIN_FLAGS = (
    ("master", "string", ""), ("train_dir", "string", "/tmp/tfmodel/"), ("warmup_epochs", "float", 0),
    ("num_clones", "integer", 1), ("clone_on_cpu", "bool", False), ("worker_replicas", "integer", 1),
    ("num_ps_tasks", "integer", 0), ("num_readers", "integer", 4), ("num_preprocessing_threads", "integer", 4),
    ("log_every_n_steps", "integer", 10), ("save_summaries_secs", "integer", 600),
    ("save_interval_secs", "integer", 600), ("task", "integer", 0), ("weight_decay", "float", 0.00004),
    ("optimizer", "string", "rmsprop"), ("adadelta_rho", "float", 0.95),
    ("adagrad_initial_accumulator_value", "float", 0.1), ("adam_beta1", "float", 0.9),
    ("adam_beta2", "float", 0.999), ("opt_epsilon", "float", 1.0), ("ftrl_learning_rate_power", "float", -0.5),
    ("ftrl_initial_accumulator_value", "float", 0.1), ("ftrl_l1", "float", 0.0), ("ftrl_l2", "float", 0.0),
    ("momentum", "float", 0.9), ("rmsprop_momentum", "float", 0.9), ("rmsprop_decay", "float", 0.9),
    ("quantize_delay", "integer", -1), ("learning_rate_decay_type", "string", "exponential"),
    ("learning_rate", "float", 0.01), ("end_learning_rate", "float", 0.0001), ("label_smoothing", "float", 0.0),
    ("learning_rate_decay_factor", "float", 0.94), ("num_epochs_per_decay", "float", 2.0),
    ("sync_replicas", "bool", False), ("replicas_to_aggregate", "integer", 1),
    ("moving_average_decay", "float", None), ("dataset_name", "string", "imagenet"),
    ("dataset_split_name", "string", "train"), ("dataset_dir", "string", None), ("labels_offset", "integer", 0),
    ("model_name", "string", "inception_v3"), ("preprocessing_name", "string", None),
    ("batch_size", "integer", 32), ("train_image_size", "integer", None), ("max_number_of_steps", "integer", None),
    ("use_grayscale", "bool", False), ("checkpoint_path", "string", None),
    ("checkpoint_exclude_scopes", "string", None), ("trainable_scopes", "string", None),
    ("ignore_missing_vars", "bool", False),
)
OFFICIAL_EVAL_FLAGS = (
    ("batch_size", "integer", 100), ("max_num_batches", "integer", None), ("master", "string", ""),
    ("checkpoint_path", "string", "/tmp/tfmodel/"), ("eval_dir", "string", "/tmp/tfmodel/"),
    ("num_preprocessing_threads", "integer", 4), ("dataset_name", "string", "imagenet"),
    ("dataset_split_name", "string", "test"), ("dataset_dir", "string", None), ("labels_offset", "integer", 0),
    ("model_name", "string", "inception_v3"), ("preprocessing_name", "string", None),
    ("moving_average_decay", "float", None), ("eval_image_size", "integer", None), ("quantize", "bool", False),
    ("use_grayscale", "bool", False),
)
OFFICIAL_EXPORT_FLAGS = (
    ("model_name", "string", "inception_v3"), ("is_training", "bool", False), ("image_size", "integer", None),
    ("batch_size", "integer", None), ("dataset_name", "string", "imagenet"), ("labels_offset", "integer", 0),
    ("output_file", "string", ""), ("dataset_dir", "string", ""), ("quantize", "bool", False),
    ("is_video_model", "bool", False), ("num_frames", "integer", None), ("write_text_graphdef", "bool", False),
    ("use_grayscale", "bool", False),
)
OFFICIAL_FLAGS = {TRAIN_SCRIPT: OFFICIAL_TRAIN_FLAGS, EVAL_SCRIPT: OFFICIAL_EVAL_FLAGS,
                  EXPORT_SCRIPT: OFFICIAL_EXPORT_FLAGS}
SCRIPT_CONFIGS = {TRAIN_SCRIPT: TrainConfig, EVAL_SCRIPT: EvalConfig, EXPORT_SCRIPT: ExportConfig}
# absl's flag_type() of each official DEFINE_* kind, and the Python type of the config field behind it.
ABSL_TYPES = {"string": "string", "integer": "int", "float": "float", "bool": "bool"}
FIELD_TYPES = {"string": str, "integer": int, "float": float, "bool": bool}

# Loads one script as a module (its main does not run) and prints {flag: [type, default]} as JSON.
DUMP_FLAGS = r"""
import importlib.util, json, os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))  # as `python script.py` does: the script's folder first
spec = importlib.util.spec_from_file_location("script_under_test", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
from absl import flags
print(json.dumps({name: [flag.flag_type(), flag.default] for name, flag in flags.FLAGS._flags().items()}))
"""


def config_fields(config_type: type) -> dict:
    """{name: (type, default)} of every field of ``config_type`` and the settings dataclasses it nests."""
    found = {}
    for field in dataclasses.fields(config_type):
        if dataclasses.is_dataclass(field.default_factory):
            found.update(config_fields(field.default_factory))
            continue
        value_type = field.type
        if typing.get_origin(value_type) is typing.Union:  # Optional[X]
            value_type = next(arg for arg in typing.get_args(value_type) if arg is not type(None))
        found[field.name] = (value_type, field.default)
    return found


@pytest.mark.parametrize("script", list(OFFICIAL_FLAGS), ids=os.path.basename)
def test_every_official_flag_has_a_config_field_of_its_type_and_default(script):
    ours = config_fields(SCRIPT_CONFIGS[script])
    for name, kind, default in OFFICIAL_FLAGS[script]:
        assert name in ours, f"{os.path.basename(script)} lacks --{name}"
        assert ours[name] == (FIELD_TYPES[kind], default), (name, ours[name], (kind, default))


@pytest.fixture(scope="module")
def defined_flags() -> dict:
    """{script: {flag: (type, default)}} as each script defines them, the three loaded in parallel."""
    processes = {
        script: subprocess.Popen([sys.executable, "-c", DUMP_FLAGS, script], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=script_env())
        for script in OFFICIAL_FLAGS
    }
    found = {}
    for script, process in processes.items():
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-3000:]
        found[script] = {name: tuple(value) for name, value in json.loads(stdout.splitlines()[-1]).items()}
    return found


@pytest.mark.slow
@pytest.mark.parametrize("script", list(OFFICIAL_FLAGS), ids=os.path.basename)
def test_every_official_flag_is_defined_by_the_script_with_its_official_type_and_default(defined_flags, script):
    ours = defined_flags[script]
    for name, kind, default in OFFICIAL_FLAGS[script]:
        assert name in ours, f"{os.path.basename(script)} lacks --{name}"
        assert ours[name] == (ABSL_TYPES[kind], default), (name, ours[name], (kind, default))


def test_eval_quantize_of_a_checkpoint_is_refused_naming_the_tflite_path(tmp_path):
    process = run_script(EVAL_SCRIPT, "--quantize", f"--checkpoint_path={tmp_path}", f"--eval_dir={tmp_path}",
                         "--dataset_name=fashion_mnist", "--model_name=lenet")
    check_bad_input(process, "error: --quantize evaluates an int8 TensorFlow Lite model, not a checkpoint: export one "
                             "with export_inference_graph.py --quantize --output_file=model.tflite")


def test_negative_warmup_epochs_is_refused_with_one_error_line(tmp_path):
    process = run_script(TRAIN_SCRIPT, "--warmup_epochs=-1", f"--train_dir={tmp_path}",
                         "--dataset_name=fashion_mnist", "--model_name=lenet", "--max_number_of_steps=1")
    check_bad_input(process, "error: --warmup_epochs=-1.0 must be a number >= 0")
