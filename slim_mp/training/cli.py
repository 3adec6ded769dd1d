"""Command-line flags shared by the training and evaluation scripts, and the runner that reports bad input.

Each flag is defined from a field of a config dataclass (``TrainConfig``, ``EvalConfig`` and the
settings they nest), so a flag's name and default are written once, in the dataclass;
``config_from_flags`` builds the dataclass back from the parsed flags.
"""

import dataclasses
import sys
import traceback
import typing
from typing import Any, Callable, Dict, Optional, Sequence, Type, TypeVar

from absl import app
from absl import flags as absl_flags

FLAGS = absl_flags.FLAGS
ConfigT = TypeVar("ConfigT")

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

absl_flags.DEFINE_boolean("verbose", False, "Print the full traceback when the run fails.")

HELP: Dict[str, str] = {
    # data and model
    "dataset_name": "The name of the dataset to load (e.g. imagenet, cifar10, flowers, fashion_mnist, image_folder).",
    "dataset_split_name": "The name of the split to read.",
    "dataset_dir": "The folder of the dataset files (unset for the bundled fashion_mnist subset).",
    "labels_offset": "An offset subtracted from the labels (e.g. 1 for ImageNet checkpoints without background).",
    "model_name": "The name of the network (see nets/nets_factory.py).",
    "preprocessing_name": "The preprocessing to use; unset means the one of --model_name.",
    "batch_size": "The number of images in each batch.",
    "use_grayscale": "Feed the network single-channel (grayscale) images.",
    "num_preprocessing_threads": "The number of images decoded and preprocessed in parallel.",
    "moving_average_decay": "The decay of the moving average of the model variables; unset for none.",
    "master": "The address of the TensorFlow master (a running worker server, e.g. grpc://host:2222); '' is local.",
    # training
    "train_dir": "Folder where checkpoints and event logs are written (training resumes from it).",
    "num_clones": "Number of model clones to deploy (one per GPU, or all on the CPU with --clone_on_cpu).",
    "clone_on_cpu": "Place the model clones on the CPU.",
    "worker_replicas": "Number of worker replicas.",
    "num_ps_tasks": "Number of parameter servers; 0 trains in this process alone.",
    "num_readers": "Number of parallel readers (the dataset reader interleaves its files itself).",
    "log_every_n_steps": "Print a progress line every this many steps.",
    "save_summaries_secs": "Write TensorBoard summaries every this many seconds.",
    "save_interval_secs": "Save a checkpoint every this many seconds (and always at the end).",
    "task": "Task id of this replica.",
    "weight_decay": "The weight decay on the model weights.",
    "quantize_delay": "Steps before quantized training starts; -1 disables it (quantization is not supported).",
    "label_smoothing": "The amount of label smoothing.",
    "sync_replicas": "Synchronize the replicas: average their gradients into one update per step.",
    "replicas_to_aggregate": "The number of gradients to collect before updating the parameters.",
    "train_image_size": "Train image size; unset means the network's default.",
    "max_number_of_steps": "The maximum number of training steps; unset trains until interrupted.",
    "checkpoint_path": "Checkpoint file or folder to fine-tune from.",
    "checkpoint_exclude_scopes": "Comma-separated scopes of variables not restored from --checkpoint_path.",
    "trainable_scopes": "Comma-separated scopes of the variables to train; unset trains all.",
    "ignore_missing_vars": "Leave model variables missing from --checkpoint_path at their initial values.",
    "ps_hosts": "Comma-separated host:port of the parameter servers (this worker then starts its own server).",
    "worker_hosts": "Comma-separated host:port of the workers, task 0 first.",
    "fault_nonfinite_steps": "Testing aid: make this process's gradients inf at these of its steps (from 1).",
    "seed": "Graph-level random seed (initialisation, shuffling, augmentation); unset for a random one.",
    # optimizer
    "optimizer": "The optimizer: adadelta, adagrad, adam, ftrl, momentum, sgd or rmsprop.",
    "adadelta_rho": "The decay rate of adadelta.",
    "adagrad_initial_accumulator_value": "Starting value of the AdaGrad accumulators.",
    "adam_beta1": "The exponential decay rate of the 1st moment estimates.",
    "adam_beta2": "The exponential decay rate of the 2nd moment estimates.",
    "opt_epsilon": "Epsilon term of the optimizer.",
    "ftrl_learning_rate_power": "The learning rate power of FTRL.",
    "ftrl_initial_accumulator_value": "Starting value of the FTRL accumulators.",
    "ftrl_l1": "The FTRL l1 regularization strength.",
    "ftrl_l2": "The FTRL l2 regularization strength.",
    "momentum": "The momentum of the MomentumOptimizer.",
    "rmsprop_momentum": "Momentum of RMSProp.",
    "rmsprop_decay": "Decay term of RMSProp.",
    # learning rate
    "learning_rate_decay_type": "How the learning rate decays: fixed, exponential or polynomial.",
    "learning_rate": "Initial learning rate.",
    "end_learning_rate": "The minimal learning rate of the polynomial decay.",
    "learning_rate_decay_factor": "Learning rate decay factor.",
    "num_epochs_per_decay": "Number of epochs after which the learning rate decays.",
    # precision
    "precision": "Compute precision: float32, or float16 / bfloat16 for mixed precision (float32 master weights).",
    "mp_allow_ops": "Op types to add to the mixed-precision allow list (comma-separated).",
    "mp_deny_ops": "Op types to keep in float32 (comma-separated).",
    "mp_keep_fp32_scopes": "Name scopes whose ops stay in float32 (comma-separated), e.g. the logits layer.",
    "mp_report": "Write the graph pass's report to this JSON file.",
    "mp_placement": "Where ops run low: measured (time conv/matmul ops on this device, keep float32 where "
                    "low precision is slower; decisions saved to --train_dir/placement.json) or static (the "
                    "op lists only).",
    "loss_scale": "'dynamic' or a fixed number; unset means dynamic for float16 and none for bfloat16.",
    "loss_scale_init": "Initial dynamic loss scale.",
    "loss_scale_incr_every_n_steps": "Grow the dynamic loss scale after this many finite steps in a row.",
    "loss_scale_decr_every_n_nan_or_inf": "Shrink the dynamic loss scale after this many steps with inf/NaN.",
    "loss_scale_incr_ratio": "Factor by which the dynamic loss scale grows.",
    "loss_scale_decr_ratio": "Factor by which the dynamic loss scale shrinks.",
    # evaluation
    "eval_dir": "Folder where the metrics (metrics.json) are written.",
    "max_num_batches": "Evaluate at most this many batches; unset reads the whole split.",
    "eval_image_size": "Eval image size; unset means the network's default.",
}

_DEFINERS: Dict[type, Callable[..., Any]] = {
    str: absl_flags.DEFINE_string,
    int: absl_flags.DEFINE_integer,
    float: absl_flags.DEFINE_float,
    bool: absl_flags.DEFINE_boolean,
}


def _value_type(annotation: Any) -> Any:
    """Strip ``Optional[...]`` from a field annotation."""
    if typing.get_origin(annotation) is typing.Union:
        return next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    return annotation


def define_flags(config_type: type, help_overrides: Optional[Dict[str, str]] = None) -> None:
    """Define one absl flag per field of ``config_type`` (recursing into nested dataclasses), skipping defined ones.

    Tuple fields become comma-separated list flags.
    """
    help_overrides = help_overrides or {}
    for field in dataclasses.fields(config_type):
        value_type = _value_type(field.type)
        if dataclasses.is_dataclass(value_type):
            define_flags(value_type, help_overrides)
            continue
        if field.name in FLAGS:
            continue
        help_text = help_overrides.get(field.name, HELP[field.name])
        if typing.get_origin(value_type) is tuple:
            absl_flags.DEFINE_list(field.name, list(field.default), help_text)
        else:
            _DEFINERS[value_type](field.name, field.default, help_text)


def config_from_flags(config_type: Type[ConfigT]) -> ConfigT:
    """Build ``config_type`` from the parsed flags (nested dataclasses included); list flags become tuples."""
    values = {}
    for field in dataclasses.fields(config_type):
        value_type = _value_type(field.type)
        if dataclasses.is_dataclass(value_type):
            values[field.name] = config_from_flags(value_type)
        elif typing.get_origin(value_type) is tuple:
            items = [item for item in FLAGS[field.name].value or () if item]
            values[field.name] = _list_items(field.name, items, typing.get_args(value_type)[0])
        else:
            values[field.name] = FLAGS[field.name].value
    return config_type(**values)


def _list_items(name: str, items: Sequence[str], item_type: type) -> tuple:
    """Convert the items of list flag ``name`` to ``item_type``; ValueError naming the flag for a bad item."""
    try:
        return tuple(item_type(item) for item in items)
    except ValueError as error:
        raise ValueError(
            f"--{name}={','.join(items)} holds an item that is not {item_type.__name__}; pass e.g. --{name}=3,7."
        ) from error


def _parse_flags(argv: Sequence[str]) -> list:
    """Parse the command line; on a bad flag print one line naming it and exit with ``EXIT_BAD_INPUT``."""
    try:
        return FLAGS(list(argv))
    except absl_flags.Error as error:
        print(f"error: {error}; run with --helpshort to see the flags.", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def _report_and_exit(error: BaseException, message: str, code: int) -> None:
    """Print ``error: message`` (after the traceback under --verbose) and exit with ``code``."""
    if FLAGS.verbose:
        traceback.print_exception(error)
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def run(main: Callable[..., None], takes_arguments: bool = False) -> None:
    """Run ``main`` as a command-line program.

    Bad input (``UsageError``, ``ValueError``, ``TypeError``) prints one ``error: ...`` line
    naming the flag and the fix and exits with status 2, with the traceback only under
    ``--verbose``; Ctrl-C exits with status 130 (training saves a checkpoint first). With
    ``takes_arguments`` the arguments after ``--`` are passed to ``main`` as a list; otherwise
    any positional argument is an error.
    """

    def guarded(argv: Sequence[str]) -> None:
        try:
            if takes_arguments:
                main(list(argv[1:]))
                return
            if len(argv) > 1:
                raise app.UsageError(
                    f"unexpected argument {argv[1]!r}; pass every option as a --flag=value pair."
                )
            main()
        except KeyboardInterrupt as interrupt:
            _report_and_exit(interrupt, "interrupted", EXIT_INTERRUPTED)
        except (app.UsageError, ValueError, TypeError) as error:
            _report_and_exit(error, str(error), EXIT_BAD_INPUT)

    app.run(guarded, flags_parser=_parse_flags)
