"""The training script's flags: the original TF-Slim names and defaults, new precision flags, config building."""

import pytest
from absl import flags as absl_flags

from slim_mp.training import cli as flags
from slim_mp.training.train_config import TrainConfig

# Names and defaults of TF-Slim's train_image_classifier.py (tensorflow/models, research/slim).
ORIGINAL_DEFAULTS = {
    "train_dir": "/tmp/tfmodel/", "num_clones": 1, "clone_on_cpu": False, "worker_replicas": 1,
    "num_ps_tasks": 0, "num_readers": 4, "num_preprocessing_threads": 4, "log_every_n_steps": 10,
    "save_summaries_secs": 600, "save_interval_secs": 600, "task": 0, "master": "", "weight_decay": 0.00004,
    "optimizer": "rmsprop", "adadelta_rho": 0.95, "adagrad_initial_accumulator_value": 0.1, "adam_beta1": 0.9,
    "adam_beta2": 0.999, "opt_epsilon": 1.0, "ftrl_learning_rate_power": -0.5,
    "ftrl_initial_accumulator_value": 0.1, "ftrl_l1": 0.0, "ftrl_l2": 0.0, "momentum": 0.9,
    "rmsprop_momentum": 0.9, "rmsprop_decay": 0.9, "quantize_delay": -1,
    "learning_rate_decay_type": "exponential", "learning_rate": 0.01, "end_learning_rate": 0.0001,
    "label_smoothing": 0.0, "learning_rate_decay_factor": 0.94, "num_epochs_per_decay": 2.0,
    "sync_replicas": False, "replicas_to_aggregate": 1, "moving_average_decay": None, "dataset_name": "imagenet",
    "dataset_split_name": "train", "dataset_dir": None, "labels_offset": 0, "model_name": "inception_v3",
    "preprocessing_name": None, "batch_size": 32, "train_image_size": None, "max_number_of_steps": None,
    "use_grayscale": False, "checkpoint_path": None, "checkpoint_exclude_scopes": None, "trainable_scopes": None,
    "ignore_missing_vars": False,
}
NEW_FLAGS = (
    "precision", "loss_scale", "loss_scale_init", "loss_scale_incr_every_n_steps",
    "loss_scale_decr_every_n_nan_or_inf", "loss_scale_incr_ratio", "loss_scale_decr_ratio", "mp_allow_ops",
    "mp_deny_ops", "mp_keep_fp32_scopes", "mp_report", "verbose",
)


@pytest.fixture(scope="module")
def parse():
    flags.define_flags(TrainConfig)

    def parse_args(*args):
        flags.FLAGS.unparse_flags()
        flags.FLAGS(["train_image_classifier.py", *args])
        return flags.config_from_flags(TrainConfig)

    yield parse_args
    flags.FLAGS.unparse_flags()


def test_every_original_flag_keeps_its_name_and_default(parse):
    parse()
    for name, default in ORIGINAL_DEFAULTS.items():
        assert flags.FLAGS[name].default == default, name
    assert all(name in flags.FLAGS for name in NEW_FLAGS)


def test_config_from_flags_fills_nested_settings_and_splits_lists(parse):
    config = parse("--optimizer=adam", "--adam_beta1=0.5", "--precision=bfloat16", "--mp_keep_fp32_scopes=a/b,c",
                   "--loss_scale=dynamic", "--learning_rate_decay_type=fixed", "--batch_size=8")
    assert config.optimizer_settings.optimizer == "adam" and config.optimizer_settings.adam_beta1 == 0.5
    assert config.precision_options.precision == "bfloat16"
    assert config.precision_options.mp_keep_fp32_scopes == ("a/b", "c")
    assert config.loss_scale_options.loss_scale == "dynamic"
    assert config.learning_rate_settings.learning_rate_decay_type == "fixed"
    assert config.batch_size == 8


def test_default_config_equals_the_flag_defaults(parse):
    assert parse() == TrainConfig()


def test_bad_flag_values_are_parse_errors(parse):
    with pytest.raises(absl_flags.IllegalFlagValueError):
        parse("--batch_size=many")
