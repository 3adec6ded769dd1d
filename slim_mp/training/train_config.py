"""``TrainConfig``: every option of ``train_image_classifier.py``, named and defaulted as the original flags."""

import dataclasses
from typing import Optional, Tuple

from absl import logging

from slim_mp.distribute.clones import ClonePlacement
from slim_mp.graph_pass.op_classes import check_op_type
from slim_mp.loss_scale.policy import parse_loss_scale
from slim_mp.distribute.cluster import ClusterLayout, make_cluster_layout
from slim_mp.training.fault_injection import check_fault_steps
from slim_mp.training.learning_rate import LearningRateSettings, check_decay_type
from slim_mp.training.optimizers import OptimizerSettings, check_optimizer_name
from slim_mp.training.precision_flags import LossScaleOptions, PrecisionOptions


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Options of one training run (the field names are the flag names)."""

    train_dir: str = "/tmp/tfmodel/"
    num_clones: int = 1
    clone_on_cpu: bool = False
    worker_replicas: int = 1
    num_ps_tasks: int = 0
    num_readers: int = 4
    num_preprocessing_threads: int = 4
    log_every_n_steps: int = 10
    save_summaries_secs: int = 600
    save_interval_secs: int = 600
    task: int = 0
    master: str = ""
    weight_decay: float = 0.00004
    quantize_delay: int = -1
    label_smoothing: float = 0.0
    sync_replicas: bool = False
    replicas_to_aggregate: int = 1
    moving_average_decay: Optional[float] = None
    dataset_name: str = "imagenet"
    dataset_split_name: str = "train"
    dataset_dir: Optional[str] = None
    labels_offset: int = 0
    model_name: str = "inception_v3"
    preprocessing_name: Optional[str] = None
    batch_size: int = 32
    train_image_size: Optional[int] = None
    max_number_of_steps: Optional[int] = None
    use_grayscale: bool = False
    checkpoint_path: Optional[str] = None
    checkpoint_exclude_scopes: Optional[str] = None
    trainable_scopes: Optional[str] = None
    ignore_missing_vars: bool = False
    seed: Optional[int] = None
    ps_hosts: Tuple[str, ...] = ()
    worker_hosts: Tuple[str, ...] = ()
    fault_nonfinite_steps: Tuple[int, ...] = ()
    optimizer_settings: OptimizerSettings = dataclasses.field(default_factory=OptimizerSettings)
    learning_rate_settings: LearningRateSettings = dataclasses.field(default_factory=LearningRateSettings)
    precision_options: PrecisionOptions = dataclasses.field(default_factory=PrecisionOptions)
    loss_scale_options: LossScaleOptions = dataclasses.field(default_factory=LossScaleOptions)


def cluster_layout(config: TrainConfig) -> ClusterLayout:
    """This process's place in the cluster the flags describe (ValueError naming the flag if they disagree)."""
    return make_cluster_layout(
        config.task, config.worker_replicas, config.num_ps_tasks, config.ps_hosts, config.worker_hosts, config.master
    )


def _check_replication(config: TrainConfig) -> None:
    """Raise ValueError naming the flag when the clone or replica flags contradict each other."""
    ClonePlacement(config.num_clones, config.clone_on_cpu)
    cluster_layout(config)
    if config.sync_replicas and config.worker_replicas < 2:
        raise ValueError(
            f"--sync_replicas needs several workers, but --worker_replicas={config.worker_replicas}; "
            "raise --worker_replicas or drop --sync_replicas."
        )
    if config.sync_replicas and config.replicas_to_aggregate < 1:
        raise ValueError(f"--replicas_to_aggregate={config.replicas_to_aggregate} must be at least 1.")
    if config.quantize_delay >= 0:
        raise ValueError(f"--quantize_delay={config.quantize_delay} is not supported (no quantized training); "
                         "use --quantize_delay=-1.")


# Typical values, for the messages that refuse a negative one.
_EXAMPLES = {"learning_rate": 0.01, "weight_decay": 0.00004, "save_interval_secs": 600, "save_summaries_secs": 600}


def check_train_config(config: TrainConfig) -> None:
    """Raise ValueError naming the flag for options that are unsupported or out of range, before any work."""
    _check_replication(config)
    check_fault_steps(config.fault_nonfinite_steps)
    check_optimizer_name(config.optimizer_settings.optimizer)
    check_decay_type(config.learning_rate_settings.learning_rate_decay_type)
    for flag, value in (("log_every_n_steps", config.log_every_n_steps), ("batch_size", config.batch_size)):
        if value < 1:
            raise ValueError(f"--{flag}={value} must be a positive integer; pass e.g. --{flag}=10.")
    if config.max_number_of_steps is not None and config.max_number_of_steps < 1:
        raise ValueError(
            f"--max_number_of_steps={config.max_number_of_steps} would save an untrained model; pass a positive "
            "step count, or leave it unset to train until interrupted."
        )
    if config.train_image_size is not None and config.train_image_size < 1:
        raise ValueError(f"--train_image_size={config.train_image_size} must be a positive integer; pass e.g. "
                         "--train_image_size=224, or leave it unset for the network's default.")
    if config.labels_offset < 0:
        raise ValueError(f"--labels_offset={config.labels_offset} must be >= 0; pass 0 or the offset to remove.")
    if not 0.0 <= config.label_smoothing < 1.0:
        raise ValueError(f"--label_smoothing={config.label_smoothing} must lie in [0, 1); pass e.g. 0.1.")
    for flag, value in (
        ("learning_rate", config.learning_rate_settings.learning_rate),
        ("weight_decay", config.weight_decay),
        ("save_interval_secs", config.save_interval_secs),
        ("save_summaries_secs", config.save_summaries_secs),
    ):
        if not value >= 0:  # also refuses nan
            raise ValueError(f"--{flag}={value} must be a number >= 0; pass e.g. --{flag}={_EXAMPLES[flag]}.")
    _check_optimizer_settings(config.optimizer_settings)
    _check_precision_flags(config)


def _check_optimizer_settings(settings: OptimizerSettings) -> None:
    """Raise ValueError for Adam's betas outside [0, 1); warn about Adam left at RMSProp's --opt_epsilon=1.0."""
    for flag, value in (("adam_beta1", settings.adam_beta1), ("adam_beta2", settings.adam_beta2)):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"--{flag}={value} must lie in [0, 1); pass e.g. --adam_beta1=0.9 --adam_beta2=0.999.")
    if settings.optimizer == "adam" and settings.opt_epsilon == OptimizerSettings.opt_epsilon:
        logging.warning("--optimizer=adam with --opt_epsilon=%g (the default, chosen for RMSProp) makes Adam take "
                        "much smaller steps; consider --opt_epsilon=1e-8.", settings.opt_epsilon)


def _check_precision_flags(config: TrainConfig) -> None:
    """Raise ValueError naming the flag for a --loss_scale that is not one (whatever the precision) or an unknown op."""
    loss_scale = config.loss_scale_options.loss_scale
    try:
        parse_loss_scale(loss_scale)
    except ValueError as error:
        raise ValueError(f"--loss_scale={loss_scale} is neither 'dynamic' nor a number >= 1; "
                         "pass e.g. --loss_scale=dynamic or --loss_scale=128.") from error
    options = config.precision_options
    for flag, op_types in (("mp_allow_ops", options.mp_allow_ops), ("mp_deny_ops", options.mp_deny_ops)):
        for op_type in op_types:
            try:
                check_op_type(op_type)
            except ValueError as error:
                raise ValueError(f"--{flag}={','.join(op_types)}: {error} Pass op type names as TensorFlow spells "
                                 "them (e.g. Softmax).") from error
