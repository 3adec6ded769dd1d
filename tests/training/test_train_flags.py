"""The scripts' flags: the original TF-Slim names and defaults, new precision flags, help on every field, configs."""

import dataclasses
from typing import Tuple

import pytest
from absl import flags

from slim_mp.config_fields import option
from slim_mp.distribute.cluster import ParameterServerConfig
from slim_mp.measure.parity.parity_config import ParityConfig
from slim_mp.training import cli
from slim_mp.training.evaluation import EvalConfig
from slim_mp.training.train_config import TrainConfig

# Every config dataclass a script defines its flags from (the nested settings are reached through them).
SCRIPT_CONFIGS = (TrainConfig, EvalConfig, ParityConfig, ParameterServerConfig)

# Names and defaults of TF-Slim's train_image_classifier.py (tensorflow/models, research/slim).
ORIGINAL_DEFAULTS = {
    "train_dir": "/tmp/tfmodel/", "warmup_epochs": 0.0, "num_clones": 1, "clone_on_cpu": False, "worker_replicas": 1,
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
    cli.define_flags(TrainConfig)

    def parse_args(*args):
        cli.FLAGS.unparse_flags()
        cli.FLAGS(["train_image_classifier.py", *args])
        return cli.config_from_flags(TrainConfig)

    yield parse_args
    cli.FLAGS.unparse_flags()


def test_every_original_flag_keeps_its_name_and_default(parse):
    parse()
    for name, default in ORIGINAL_DEFAULTS.items():
        assert cli.FLAGS[name].default == default, name
    assert all(name in cli.FLAGS for name in NEW_FLAGS)


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
    with pytest.raises(flags.IllegalFlagValueError):
        parse("--batch_size=many")


def fields_without_help(config_type: type) -> list:
    """``Class.field`` of every flag field of ``config_type`` and its nested dataclasses that lacks help text."""
    missing = []
    for field in dataclasses.fields(config_type):
        if dataclasses.is_dataclass(field.default_factory):
            missing += fields_without_help(field.default_factory)
        elif not str(field.metadata.get("help", "")).strip():
            missing.append(f"{config_type.__name__}.{field.name}")
    return missing


@pytest.mark.parametrize("config_type", SCRIPT_CONFIGS, ids=lambda config_type: config_type.__name__)
def test_every_config_field_declares_its_help(config_type):
    assert fields_without_help(config_type) == []


def test_the_flag_help_is_the_field_help(parse):
    parse()
    assert "adadelta" in cli.FLAGS["optimizer"].help and "rmsprop" in cli.FLAGS["optimizer"].help
    assert cli.FLAGS["loss_scale_init"].help == "Initial dynamic loss scale."


def test_a_field_without_help_is_refused_when_its_flag_is_defined():
    @dataclasses.dataclass(frozen=True)
    class Nested:
        undocumented_knob: int = 3

    @dataclasses.dataclass(frozen=True)
    class Outer:
        nested: Nested = dataclasses.field(default_factory=Nested)

    assert fields_without_help(Outer) == ["Nested.undocumented_knob"]
    with pytest.raises(TypeError, match=r"Nested\.undocumented_knob has no help text"):
        cli.define_flags(Outer)
    assert "undocumented_knob" not in cli.FLAGS


def test_a_list_flag_default_holding_zero_round_trips(parse):
    @dataclasses.dataclass(frozen=True)
    class WithSeeds:  # like ParityConfig.seeds, whose default starts with seed 0
        list_flag_test_seeds: Tuple[int, ...] = option((0, 1, 2), "Seeds of this test.")

    cli.define_flags(WithSeeds)
    parse()
    assert cli.config_from_flags(WithSeeds) == WithSeeds()
