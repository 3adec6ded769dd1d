"""Build the training graph of ``train_image_classifier.py``: input, network, losses, optimizer, mixed precision."""

import contextlib
import dataclasses
from typing import Dict, List, Optional

import tensorflow as tf
import tf_slim as slim

from slim_mp.checkpoint_restore import InitFn, fine_tune_init_fn
from slim_mp.datasets import DatasetSpec, get_dataset
from slim_mp.input_pipeline import InputOptions, next_batch
from slim_mp.learning_rate import make_learning_rate
from slim_mp.mixed_precision import MixedPrecisionOptimizer, enable_mixed_precision
from slim_mp.model_setup import input_size, network_and_preprocessing
from slim_mp.optimizers import make_optimizer
from slim_mp.precision_options import make_manager
from slim_mp.scopes import in_scopes, parse_scopes
from slim_mp.train_config import TrainConfig

tf1 = tf.compat.v1

AUX_LOGITS_WEIGHT = 0.4


@dataclasses.dataclass
class TrainGraph:
    """The graph of one run and the tensors the loop needs.

    ``progress`` tensors (loss, step, learning rate, loss scale, skipped steps) are read after
    the train step in the same ``session.run``.
    """

    graph: tf.Graph
    global_step: tf.Variable
    train_op: tf.Tensor
    progress: Dict[str, tf.Tensor]
    summary_op: Optional[tf.Tensor]
    saver: tf1.train.Saver
    init_fn: Optional[InitFn]
    dataset: DatasetSpec
    optimizer: tf1.train.Optimizer


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


def _moving_average_step(train_op: tf.Tensor, decay: float, global_step: tf.Tensor) -> tf.Tensor:
    """Return ``train_op`` followed by an update of the moving averages of the model variables."""
    averages = tf1.train.ExponentialMovingAverage(decay, global_step)
    with tf.control_dependencies([train_op]):
        update = averages.apply(slim.get_model_variables())
    with tf.control_dependencies([update]):
        return tf.identity(train_op, name="train_op_with_averages")


def build_train_graph(config: TrainConfig) -> TrainGraph:
    """Build the whole training graph of ``config`` in a new graph (nothing runs yet)."""
    graph = tf.Graph()
    with graph.as_default():
        if config.seed is not None:
            tf1.set_random_seed(config.seed)
        dataset = get_dataset(config.dataset_name, config.dataset_split_name, config.dataset_dir or None)
        num_classes = dataset.num_classes - config.labels_offset
        network_fn, preprocess = network_and_preprocessing(
            config.model_name, config.preprocessing_name, num_classes, config.weight_decay,
            is_training=True, use_grayscale=config.use_grayscale,
        )
        global_step = tf1.train.get_or_create_global_step()
        input_options = InputOptions(
            batch_size=config.batch_size,
            image_size=input_size(config.train_image_size, network_fn, "--train_image_size"),
            is_training=True,
            num_preprocessing_threads=config.num_preprocessing_threads,
            labels_offset=config.labels_offset,
            use_grayscale=config.use_grayscale,
            seed=config.seed,
        )
        images, labels = next_batch(dataset, preprocess, input_options)
        placement = tf.device("/cpu:0") if config.clone_on_cpu else contextlib.nullcontext()
        with placement:
            logits, end_points = network_fn(images)
            add_classification_losses(logits, end_points, labels, num_classes, config.label_smoothing)
            total_loss = tf1.losses.get_total_loss()
        learning_rate = make_learning_rate(
            config.learning_rate_settings, global_step, dataset.num_samples, config.batch_size
        )
        optimizer = make_optimizer(config.optimizer_settings, learning_rate)
        precision = config.precision_options
        if precision.mixed:
            optimizer = enable_mixed_precision(
                optimizer, precision.precision, loss_scale=make_manager(config.loss_scale_options, precision.precision),
                **precision.rewrite_options(),
            )
        init_fn = fine_tune_init_fn(
            config.checkpoint_path, parse_scopes(config.checkpoint_exclude_scopes),
            config.ignore_missing_vars, config.train_dir,
        )
        train_op = slim.learning.create_train_op(
            total_loss, optimizer, global_step=global_step,
            variables_to_train=variables_to_train(config.trainable_scopes),
        )
        if config.moving_average_decay:
            train_op = _moving_average_step(train_op, config.moving_average_decay, global_step)
        losses = {f"losses/{loss.op.name}": loss for loss in tf1.losses.get_losses()}
        losses["losses/regularization"] = tf1.losses.get_regularization_loss()
        losses["total_loss"] = train_op
        summary_op = _add_summaries(losses, learning_rate)
        progress = _progress_tensors(train_op, global_step, learning_rate, optimizer)
        saver = tf1.train.Saver(max_to_keep=None, save_relative_paths=True)
    return TrainGraph(graph, global_step, train_op, progress, summary_op, saver, init_fn, dataset, optimizer)


def _progress_tensors(
    train_op: tf.Tensor, global_step: tf.Variable, learning_rate: tf.Tensor, optimizer: tf1.train.Optimizer
) -> Dict[str, tf.Tensor]:
    """Tensors for the progress line, each read after the train step (float32 runs report scale 1, 0 skipped)."""
    with tf.control_dependencies([train_op]):
        if isinstance(optimizer, MixedPrecisionOptimizer):
            loss_scale, skipped = optimizer.loss_scale, optimizer.skipped_steps
        else:
            loss_scale, skipped = tf.constant(1.0), tf.constant(0, tf.int64)
        return {
            "loss": tf.identity(train_op),
            "step": global_step.read_value(),
            "learning_rate": tf.identity(learning_rate),
            "loss_scale": tf.identity(loss_scale),
            "skipped": tf.identity(skipped),
        }
