"""Build the training graph of ``train_image_classifier.py``: input, clones, losses, optimizer, mixed precision.

The same builder serves one process and every worker of a cluster: with parameter servers the
variables (and the loss-scale state) are placed on them, and ``--sync_replicas`` averages the
workers' gradients into one update.
"""

import contextlib
import dataclasses
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf
import tf_slim as slim
from absl import logging

from slim_mp.graph_pass import DECISIONS_FILE_NAME, MeasuringTarget, PlacementFiles, RewriteReport, in_scopes
from slim_mp.training.fine_tune_restore import InitFn, fine_tune_init_fn
from slim_mp.distribute import (CloneDevices, ClusterLayout, SyncSettings, build_train_step, create_clones,
                                form_worker_fusions, scope_filter)
from slim_mp.datasets import DatasetSpec, get_dataset
from slim_mp.training.fault_injection import inject_nonfinite_gradients
from slim_mp.training.input_pipeline import InputFeed, InputOptions, make_fed_iterator
from slim_mp.training.learning_rate import make_learning_rate
from slim_mp.training.memory_fit import check_step_fits
from slim_mp.mixed_precision import MixedPrecisionOptimizer, enable_mixed_precision
from slim_mp.numerics import NonfiniteProbe, graph_probes
from slim_mp.training.model_setup import check_training_crop, input_size, network_and_preprocessing
from slim_mp.training.optimizers import make_optimizer
from slim_mp.training.scopes import parse_scopes
from slim_mp.training.session_start import SessionOps, make_session_ops
from slim_mp.training.train_config import TrainConfig, train_step_settings

tf1 = tf.compat.v1

AUX_LOGITS_WEIGHT = 0.4
# How long a non-chief worker waits for the chief's placement decisions before measuring itself.
PLACEMENT_WAIT_SECONDS = 300.0


@dataclasses.dataclass
class TrainGraph:
    """The graph of one run and the tensors the loop needs.

    ``progress`` tensors (loss, step, learning rate, loss scale, skipped steps) are read after
    the train step in the same ``session.run``. ``images_per_step`` counts this process's images
    (batch size times clones). ``input_feed``, when set, must be run once the session exists: it
    feeds in-memory data (the bundled Fashion-MNIST) that the graph does not embed.
    ``rewrite_reports`` say what the graph pass did (empty in float32); ``nonfinite_probes`` are the
    graph's probes (empty without ``--mp_debug_nonfinite``), which the loop runs after a skipped step.
    """

    graph: tf.Graph
    global_step: tf.Variable
    progress: Dict[str, tf.Tensor]
    summary_op: Optional[tf.Tensor]
    saver: tf1.train.Saver
    init_fn: Optional[InitFn]
    dataset: DatasetSpec
    optimizer: tf1.train.Optimizer
    session_ops: SessionOps
    rewrite_reports: Tuple[RewriteReport, ...]
    nonfinite_probes: Tuple[NonfiniteProbe, ...]
    images_per_step: int
    input_feed: Optional[InputFeed] = None


def add_classification_losses(
    logits: tf.Tensor, end_points: Dict[str, tf.Tensor], labels: tf.Tensor, num_classes: int, label_smoothing: float
) -> None:
    """Add softmax cross-entropy losses to LOSSES; an auxiliary head (Inception) gets weight 0.4, as in the original."""
    one_hot = tf.one_hot(labels, num_classes)
    if "AuxLogits" in end_points:
        tf1.losses.softmax_cross_entropy(
            one_hot, end_points["AuxLogits"], label_smoothing=label_smoothing, weights=AUX_LOGITS_WEIGHT,
            scope="aux_loss",
        )
    tf1.losses.softmax_cross_entropy(one_hot, logits, label_smoothing=label_smoothing, weights=1.0)


def variables_to_train(trainable_scopes: Optional[str]) -> List[tf.Variable]:
    """Return the trainable variables under ``--trainable_scopes`` (all when unset); ValueError if none match."""
    scopes = parse_scopes(trainable_scopes)
    trainable = tf1.trainable_variables()
    if not scopes:
        return trainable
    chosen = [v for v in trainable if in_scopes(v.op.name, scopes)]
    if not chosen:
        raise ValueError(f"--trainable_scopes={trainable_scopes} matches no trainable variable; fix the scope names.")
    return chosen


def _add_summaries(losses: Dict[str, tf.Tensor], learning_rate: tf.Tensor) -> Optional[tf.Tensor]:
    """Add scalar summaries of the losses and the learning rate; return the merged summary op.

    The ``summaries/`` scope keeps the tags free of TensorFlow's ``_1`` suffixes (an op named
    ``total_loss`` already exists).
    """
    with tf.name_scope("summaries"):
        for name, value in losses.items():
            tf1.summary.scalar(name, value)
        tf1.summary.scalar("learning_rate", learning_rate)
    return tf1.summary.merge_all()


def _finite_values(tensor: tf.Tensor) -> tf.Tensor:
    """The finite elements of ``tensor``, flattened: a histogram of inf/NaN fails the step that writes it.

    Without this, an overflow or a diverging run would end in "Nan in summary histogram" instead
    of the loss check's or the divergence guard's explanation. Gathering at ``where``'s indices takes
    5 ops where ``tf.boolean_mask`` takes 30; with one histogram per model variable and end point,
    ResNet-50's train graph holds 13,200 ops instead of 21,800 and builds in about 4 s instead of 6.
    """
    flat = tf.reshape(tensor, [-1])
    return tf.gather_nd(flat, tf.where(tf.math.is_finite(flat)))


def _add_model_summaries(end_points: Dict[str, tf.Tensor], reports: Sequence[RewriteReport], histograms: bool
                         ) -> None:
    """Add official TF-Slim's model summaries and the share of ops the pass put in low precision.

    Per end point: the fraction of zeros (``sparsity/``) and, with ``histograms``, the activation
    histogram (``activations/``); with ``histograms`` also one histogram per model variable. The
    end points are first mapped through the pass's reports: summarising the tensors the network
    built before the rewrite would run a float32 copy of it.
    """
    for report in reports:
        end_points = report.remap(end_points)
    with tf.name_scope("summaries/"):  # the absolute scope: the loss scalars' "summaries" keeps its name
        for name, tensor in end_points.items():
            if not tensor.dtype.is_floating:
                continue
            tf1.summary.scalar(f"sparsity/{name}", tf.nn.zero_fraction(tensor))
            if histograms:
                tf1.summary.histogram(f"activations/{name}", _finite_values(tensor))
        if histograms:
            for variable in slim.get_model_variables():
                tf1.summary.histogram(variable.op.name, _finite_values(variable))
        considered = sum(report.ops_considered for report in reports)
        if considered:
            converted = sum(report.ops_converted for report in reports)
            tf1.summary.scalar("mixed_precision/low_precision_op_fraction", tf.constant(converted / considered))


def _clone_devices(config: TrainConfig, layout: ClusterLayout) -> CloneDevices:
    """Where the clones run; several GPU clones need that many GPUs on this machine."""
    devices = CloneDevices(config.num_clones, config.clone_on_cpu, variables_on_ps=layout.distributed)
    if config.num_clones > 1 and not config.clone_on_cpu and not layout.master:
        gpus = len(tf.config.list_physical_devices("GPU"))
        if gpus < config.num_clones:
            raise ValueError(
                f"--num_clones={config.num_clones} puts one clone per GPU, but this machine has {gpus} GPU(s); "
                "pass --clone_on_cpu or fewer clones."
            )
    return devices


def _model_fn(iterator: tf1.data.Iterator, network_fn, inputs_device: str, num_classes: int, label_smoothing: float):
    """The per-clone model: take the next batch (on the input device), run the network, add the losses."""

    def model() -> Dict[str, tf.Tensor]:
        with tf.device(inputs_device):
            images, labels = iterator.get_next()
        logits, end_points = network_fn(images)
        add_classification_losses(logits, end_points, labels, num_classes, label_smoothing)
        return end_points

    return model


def training_input_iterator(config: TrainConfig, dataset: DatasetSpec, preprocess, network_fn,
                            inputs_device: str) -> Tuple[tf1.data.Iterator, Optional[InputFeed]]:
    """The training batches of this worker (its shard of the data when there are several workers), and their feed."""
    image_size = input_size(config.train_image_size, network_fn, "train_image_size")
    check_training_crop(config.preprocessing_name or config.model_name, image_size, dataset.image_shape,
                        "train_image_size")
    options = InputOptions(
        batch_size=config.batch_size,
        image_size=image_size,
        is_training=True,
        num_preprocessing_threads=config.num_preprocessing_threads,
        labels_offset=config.labels_offset,
        seed=config.seed,
        num_shards=config.worker_replicas,
        shard_index=config.task,
    )
    with tf.device(inputs_device):
        return make_fed_iterator(dataset, preprocess, options)


def _optimizer(config: TrainConfig, learning_rate: tf.Tensor, layout: ClusterLayout,
               devices: CloneDevices) -> tf1.train.Optimizer:
    """The optimizer of ``--optimizer``, wrapped for mixed precision unless ``--precision=float32``.

    A measured placement times where the step runs (the first clone's device, this worker's session
    options) and is pinned in ``--train_dir/placement.json``: the chief writes it, a resumed run and
    the other workers read it, so every replica builds the same graph.
    """
    optimizer = make_optimizer(config.optimizer_settings, learning_rate)
    precision = config.precision_options
    if not precision.mixed:
        return optimizer
    target = MeasuringTarget(device=devices.compute_device(0) or None,
                             session_config=layout.session_config())
    files = PlacementFiles(decisions_file=os.path.join(config.train_dir, DECISIONS_FILE_NAME),
                           write_decisions=layout.is_chief, wait_seconds=PLACEMENT_WAIT_SECONDS)
    return enable_mixed_precision(
        optimizer, precision.precision, loss_scale=config.loss_scale_options.manager(precision.precision),
        count_skipped_steps=config.sync_replicas, debug_nonfinite=precision.mp_debug_nonfinite,
        options=precision.rewrite_options(target, files),
    )


def dataset_and_network(config: TrainConfig, is_training: bool) -> Tuple[DatasetSpec, int, Callable, Callable]:
    """The dataset of ``config``, its class count after ``--labels_offset``, the network and its preprocessing.

    Built in the default graph; shared by the training graph and the tools that rebuild its network
    (the numerics audit and layer diff).
    """
    dataset = get_dataset(config.dataset_name, config.dataset_split_name, config.dataset_dir or None)
    num_classes = dataset.num_classes - config.labels_offset
    network_fn, preprocess = network_and_preprocessing(
        config.model_name, config.preprocessing_name, num_classes, config.weight_decay,
        is_training=is_training, use_grayscale=config.use_grayscale, batch_norm_decay=config.batch_norm_decay,
    )
    return dataset, num_classes, network_fn, preprocess


def _check_memory(config: TrainConfig, batch_spec: Tuple[tf.TensorSpec, tf.TensorSpec], network_fn,
                  num_classes: int) -> None:
    """Before the pass and the session: stop (or warn) when this process's memory limit cannot hold the step.

    ``memory_fit.check_step_fits`` builds a float32 step of the same network and batch in a graph of
    its own, only where the process has a limit.
    """
    images_spec, labels_spec = batch_spec

    def float32_step() -> tf.Operation:
        images = tf1.placeholder(tf.float32, images_spec.shape)
        logits, end_points = network_fn(images)
        add_classification_losses(logits, end_points, tf1.placeholder(labels_spec.dtype, labels_spec.shape),
                                  num_classes, config.label_smoothing)
        gradients = tf.gradients(tf1.losses.get_total_loss(), tf1.trainable_variables())
        return tf.group(*[gradient for gradient in gradients if gradient is not None])

    warning = check_step_fits(train_step_settings(config), float32_step, config.num_clones)
    if warning:
        logging.warning("%s", warning)


def build_train_graph(config: TrainConfig, layout: ClusterLayout) -> TrainGraph:
    """Build the whole training graph of ``config`` for this process of ``layout`` (nothing runs yet)."""
    graph = tf.Graph()
    device_setter = layout.device_setter()
    with graph.as_default(), (tf1.device(device_setter) if device_setter else contextlib.nullcontext()):
        if config.seed is not None:
            tf1.set_random_seed(config.seed)
        dataset, num_classes, network_fn, preprocess = dataset_and_network(config, is_training=True)
        global_step = tf1.train.get_or_create_global_step()
        inputs_device = f"{layout.worker_device}/device:CPU:0"
        iterator, input_feed = training_input_iterator(config, dataset, preprocess, network_fn, inputs_device)
        _check_memory(config, iterator.element_spec, network_fn, num_classes)
        devices = _clone_devices(config, layout)
        clones = create_clones(
            _model_fn(iterator, network_fn, inputs_device, num_classes, config.label_smoothing), devices,
        )
        images_per_update = config.batch_size * (config.replicas_to_aggregate if config.sync_replicas else 1)
        learning_rate = make_learning_rate(
            config.learning_rate_settings, global_step, dataset.num_samples, images_per_update
        )
        optimizer = _optimizer(config, learning_rate, layout, devices)
        init_fn = fine_tune_init_fn(
            config.checkpoint_path, parse_scopes(config.checkpoint_exclude_scopes),
            config.ignore_missing_vars, config.train_dir,
        )
        sync = SyncSettings(config.replicas_to_aggregate, config.worker_replicas) if config.sync_replicas else None
        step = build_train_step(
            optimizer, clones, global_step, variables_to_train(config.trainable_scopes), sync=sync,
            moving_average_decay=config.moving_average_decay,
            transform_gradients=lambda grads: inject_nonfinite_gradients(
                grads, config.fault_nonfinite_steps, inputs_device
            ),
        )
        losses = {f"losses/{loss.op.name}": loss for loss in tf1.losses.get_losses(scope=scope_filter(clones[0].scope))}
        losses["losses/regularization"] = tf1.losses.get_regularization_loss()
        losses["total_loss"] = step.train_tensor
        rewrite_reports = tuple(optimizer.rewrite_reports) if isinstance(optimizer, MixedPrecisionOptimizer) else ()
        _add_model_summaries(clones[0].outputs, rewrite_reports, config.histogram_summaries)
        summary_op = _add_summaries(losses, learning_rate)
        progress = _progress_tensors(step.train_tensor, global_step, learning_rate, optimizer)
        saver = tf1.train.Saver(max_to_keep=None, save_relative_paths=True)
        session_ops = make_session_ops(layout.is_chief, step.sync_optimizer)
    for fusion in form_worker_fusions(graph) if layout.distributed else ():
        logging.info("fused for the cluster's workers as oneDNN names it: %s", fusion.describe())
    return TrainGraph(
        graph, global_step, progress, summary_op, saver, init_fn, dataset, optimizer, session_ops,
        rewrite_reports=rewrite_reports, nonfinite_probes=tuple(graph_probes(graph)),
        images_per_step=config.batch_size * config.num_clones, input_feed=input_feed,
    )


def _progress_tensors(
    train_tensor: tf.Tensor, global_step: tf.Variable, learning_rate: tf.Tensor, optimizer: tf1.train.Optimizer
) -> Dict[str, tf.Tensor]:
    """Tensors for the progress line, each read after the train step (float32 runs report scale 1, 0 skipped)."""
    with tf.control_dependencies([train_tensor]):
        if isinstance(optimizer, MixedPrecisionOptimizer):
            loss_scale, skipped = optimizer.loss_scale, optimizer.skipped_steps
        else:
            loss_scale, skipped = tf.constant(1.0), tf.constant(0, tf.int64)
        return {
            "loss": tf.identity(train_tensor),
            "step": global_step.read_value(),
            "learning_rate": tf.identity(learning_rate),
            "loss_scale": tf.identity(loss_scale),
            "skipped": tf.identity(skipped),
        }
