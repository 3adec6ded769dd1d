"""``TrainConfig``: every option of ``train_image_classifier.py``, named and defaulted as the original flags."""

import dataclasses
from typing import Optional, Tuple

from absl import logging

from slim_mp.config_fields import option
from slim_mp.train_dir import MAX_TO_KEEP
from slim_mp.training.data_model_options import DataModelOptions
from slim_mp.distribute import CloneDevices, ClusterLayout, make_cluster_layout
from slim_mp.graph_pass import RewriteOptions
from slim_mp.training.fault_injection import check_fault_steps
from slim_mp.training.learning_rate import LearningRateSettings, check_decay_type
from slim_mp.training.memory_fit import StepSettings
from slim_mp.training.optimizers import OptimizerSettings, check_optimizer_name
from slim_mp.training.precision_flags import LossScaleOptions


@dataclasses.dataclass(frozen=True)
class TrainConfig(DataModelOptions):
    """Options of one training run (the field names are the flag names)."""

    train_dir: str = option(
        "/tmp/tfmodel/", "Folder where checkpoints and event logs are written (training resumes from it)."
    )
    num_clones: int = option(
        1, "Number of model clones to deploy (one per GPU, or all on the CPU with --clone_on_cpu)."
    )
    clone_on_cpu: bool = option(False, "Place the model clones on the CPU.")
    worker_replicas: int = option(1, "Number of worker replicas.")
    num_ps_tasks: int = option(0, "Number of parameter servers; 0 trains in this process alone.")
    num_readers: int = option(4, "Number of parallel readers (the dataset reader interleaves its files itself).")
    log_every_n_steps: int = option(10, "Print a progress line every this many steps.")
    save_summaries_secs: int = option(600, "Write TensorBoard summaries every this many seconds.")
    histogram_summaries: bool = option(
        True, "Write histograms of the activations and model variables to TensorBoard (off: faster summaries)."
    )
    save_interval_secs: int = option(600, "Save a checkpoint every this many seconds (and always at the end).")
    max_to_keep: int = option(
        MAX_TO_KEEP, "Checkpoints kept in --train_dir, the newest; older ones are deleted at each save (as "
        "tf.compat.v1.train.Saver(max_to_keep=...) does). 0 keeps every one. Keep more while evaluations of the "
        "folder run beside training."
    )
    task: int = option(0, "Task id of this replica.")
    weight_decay: float = option(0.00004, "The weight decay on the model weights.")
    batch_norm_decay: Optional[float] = option(
        None, "The decay of batch norm's moving averages; unset means the network's own (MobileNet v1's 0.9997 "
        "needs about 10^4 steps to forget the initial statistics: 0.99 suits runs of a few hundred steps)."
    )
    quantize_delay: int = option(
        -1, "Steps before quantization-aware training starts; -1 disables it (not supported: quantize after "
        "training with export_inference_graph.py --quantize --output_file=model.tflite)."
    )
    label_smoothing: float = option(0.0, "The amount of label smoothing.")
    sync_replicas: bool = option(False, "Synchronize the replicas: average their gradients into one update per step.")
    replicas_to_aggregate: int = option(1, "The number of gradients to collect before updating the parameters.")
    dataset_split_name: str = option("train", "The name of the split to read.")
    batch_size: int = option(32, "The number of images in each batch.")
    train_image_size: Optional[int] = option(None, "Train image size; unset means the network's default.")
    max_number_of_steps: Optional[int] = option(
        None, "The maximum number of training steps; unset trains until interrupted."
    )
    checkpoint_path: Optional[str] = option(None, "Checkpoint file or folder to fine-tune from.")
    checkpoint_exclude_scopes: Optional[str] = option(
        None, "Comma-separated scopes of variables not restored from --checkpoint_path."
    )
    trainable_scopes: Optional[str] = option(
        None, "Comma-separated scopes of the variables to train; unset trains all."
    )
    ignore_missing_vars: bool = option(
        False, "Leave model variables missing from --checkpoint_path at their initial values."
    )
    seed: Optional[int] = option(
        None, "Random seed of initialisation, dropout, data order and augmentation: the same command then prints "
        "the same losses at every step (the training preprocessing runs one image at a time). Only on the same "
        "machine, TensorFlow, thread count and placement decisions (the timing cache or a copied "
        "--train_dir/placement.json); unset for a random seed and parallel preprocessing."
    )
    ps_hosts: Tuple[str, ...] = option(
        (), "Comma-separated host:port of the parameter servers (this worker then starts its own server)."
    )
    worker_hosts: Tuple[str, ...] = option((), "Comma-separated host:port of the workers, task 0 first.")
    fault_nonfinite_steps: Tuple[int, ...] = option(
        (), "Testing aid: make this process's gradients inf at these of its steps (from 1)."
    )
    optimizer_settings: OptimizerSettings = dataclasses.field(default_factory=OptimizerSettings)
    learning_rate_settings: LearningRateSettings = dataclasses.field(default_factory=LearningRateSettings)
    loss_scale_options: LossScaleOptions = dataclasses.field(default_factory=LossScaleOptions)


def train_step_settings(config: TrainConfig) -> StepSettings:
    """What sizes ``config``'s train step, for the errors of a step that does not fit."""
    return StepSettings(config.model_name, config.batch_size, config.precision_options.precision,
                        config.train_image_size, "train_image_size")


def cluster_layout(config: TrainConfig) -> ClusterLayout:
    """This process's place in the cluster the flags describe (ValueError naming the flag if they disagree)."""
    return make_cluster_layout(
        config.task, config.worker_replicas, config.num_ps_tasks, config.ps_hosts, config.worker_hosts, config.master
    )


def _check_replication(config: TrainConfig) -> None:
    """Raise ValueError naming the flag when the clone or replica flags contradict each other."""
    CloneDevices(config.num_clones, config.clone_on_cpu)
    cluster_layout(config)
    if config.sync_replicas and config.worker_replicas < 2:
        raise ValueError(
            f"--sync_replicas needs several workers, but --worker_replicas={config.worker_replicas}; "
            "raise --worker_replicas or drop --sync_replicas."
        )
    if config.sync_replicas and config.replicas_to_aggregate < 1:
        raise ValueError(f"--replicas_to_aggregate={config.replicas_to_aggregate} must be at least 1.")
    if config.quantize_delay >= 0:
        raise ValueError(f"--quantize_delay={config.quantize_delay} is not supported (no quantization-aware "
                         "training); drop it and quantize after training: export_inference_graph.py --quantize "
                         "--output_file=model.tflite writes an int8 model calibrated on the train split.")


# Typical values, for the messages that refuse a negative one.
_EXAMPLES = {
    "learning_rate": 0.01, "weight_decay": 0.00004, "save_interval_secs": 600, "save_summaries_secs": 600,
    "warmup_epochs": 5,
}


def check_train_config(config: TrainConfig) -> None:
    """Raise ValueError naming the flag for options that are unsupported or out of range, before any work."""
    _check_replication(config)
    check_fault_steps(config.fault_nonfinite_steps)
    check_optimizer_name(config.optimizer_settings.optimizer)
    check_decay_type(config.learning_rate_settings.learning_rate_decay_type)
    for flag, value in (("log_every_n_steps", config.log_every_n_steps), ("batch_size", config.batch_size)):
        if value < 1:
            raise ValueError(f"--{flag}={value} must be a positive integer; pass e.g. --{flag}=10.")
    if config.max_to_keep < 0:
        raise ValueError(f"--max_to_keep={config.max_to_keep} is negative; pass the number of checkpoints to keep "
                         f"(default {MAX_TO_KEEP}), or 0 to keep every one.")
    if config.max_number_of_steps is not None and config.max_number_of_steps < 0:
        raise ValueError(f"--max_number_of_steps={config.max_number_of_steps} is negative; pass a step count >= 1.")
    if config.train_image_size is not None and config.train_image_size < 1:
        raise ValueError(f"--train_image_size={config.train_image_size} must be a positive integer; pass e.g. "
                         "--train_image_size=224, or leave it unset for the network's default.")
    if config.labels_offset < 0:
        raise ValueError(f"--labels_offset={config.labels_offset} must be >= 0; pass 0 or the offset to remove.")
    if not 0.0 <= config.label_smoothing < 1.0:
        raise ValueError(f"--label_smoothing={config.label_smoothing} must lie in [0, 1); pass e.g. 0.1.")
    for flag, value in (
        ("learning_rate", config.learning_rate_settings.learning_rate),
        ("warmup_epochs", config.learning_rate_settings.warmup_epochs),
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
    """Raise ValueError naming the flag for an op type the graph pass's ``RewriteOptions`` refuses.

    ``RewriteOptions`` holds the one op-type check; this only says which flag the op type came from
    (``LossScaleOptions`` checks ``--loss_scale``).
    """
    options = config.precision_options
    for flag, op_class, op_types in (("mp_allow_ops", "allow", options.mp_allow_ops),
                                     ("mp_deny_ops", "deny", options.mp_deny_ops)):
        try:
            RewriteOptions(**{op_class: op_types})
        except ValueError as error:
            raise ValueError(f"--{flag}={','.join(op_types)}: {error} Pass op type names as TensorFlow spells "
                             "them (e.g. Softmax).") from error


def check_command_line_config(config: TrainConfig) -> None:
    """The rules only a command line needs, on top of ``check_train_config``.

    A library caller may train for 0 steps to save a model's initial weights (parity runs do);
    from the command line that is a mistake that would write an untrained checkpoint.

    Raises:
      ValueError: naming ``--max_number_of_steps`` when it is 0.
    """
    if config.max_number_of_steps == 0:
        raise ValueError(
            "--max_number_of_steps=0 would save an untrained model; pass a positive step count, or leave it "
            "unset to train until interrupted."
        )
