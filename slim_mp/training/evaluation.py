"""Evaluate a checkpoint on a whole split: top-1, top-5 and mean loss, every example counted exactly once.

The checkpoint is read once, into memory, after the graph is built (``checkpoint_read``): its values and
its global step come from one reader, so a training run rotating the folder meanwhile cannot take
the step from under an evaluation that finished; the metrics are printed before they are written.
A TensorFlow Lite model (``--checkpoint_path=model.tflite``) is evaluated on the same batches, with the
same metrics, by LiteRT (``tflite_interpreter``) in place of the network.
"""

import dataclasses
import os
from typing import Callable, ContextManager, Dict, Optional, Tuple

import numpy as np
import tensorflow as tf
import tf_slim as slim
from absl import logging

from slim_mp.config_fields import option
from slim_mp.json_files import write_json_atomically
from slim_mp.train_dir import disk_write_errors
from slim_mp.training.data_model_options import DataModelOptions
from slim_mp.training.checkpoint_read import CheckpointValues, check_checkpoint_path, read_checkpoint_values
from slim_mp.datasets import DatasetSpec, get_dataset
from slim_mp.training.input_pipeline import InputOptions, negative_label_errors, next_batch
from slim_mp.training.memory_fit import StepSettings, out_of_memory_named
from slim_mp.training.model_setup import input_size, network_and_preprocessing, prepare_output_dir
from slim_mp.training.precision_flags import write_rewrite_reports
from slim_mp.training.served_names import is_tflite_path
from slim_mp.training.tflite_interpreter import TFLiteModel, load_tflite_model
from slim_mp.graph_pass import MeasuringTarget, rewrite

tf1 = tf.compat.v1

METRICS_FILENAME = "metrics.json"
TOP_K = 5
# TensorBoard tags of the metrics, as official TF-Slim's eval_image_classifier.py names them (plus the loss).
SUMMARY_TAGS = {"accuracy": "eval/Accuracy", "top5": f"eval/Recall_{TOP_K}", "loss": "eval/loss"}


@dataclasses.dataclass(frozen=True)
class EvalConfig(DataModelOptions):
    """Options of one evaluation (the field names are the flag names of ``eval_image_classifier.py``)."""

    checkpoint_path: str = option(
        "/tmp/tfmodel/", "Checkpoint file, or folder whose latest checkpoint is evaluated, or a TensorFlow Lite model "
        "(.tflite) export_inference_graph.py wrote."
    )
    eval_dir: str = option(
        "/tmp/tfmodel/", "Folder where the metrics are written (metrics.json and TensorBoard scalars)."
    )
    dataset_split_name: str = option("test", "The name of the split to read.")
    batch_size: int = option(100, "The number of images in each evaluation batch.")
    max_num_batches: Optional[int] = option(None, "Evaluate at most this many batches; unset reads the whole split.")
    eval_image_size: Optional[int] = option(None, "Eval image size; unset means the network's default.")
    quantize: bool = option(
        False, "Evaluate an int8 TensorFlow Lite model (--checkpoint_path=model.tflite, exported with --quantize)."
    )


@dataclasses.dataclass(frozen=True)
class _EvalGraph:
    """The evaluation graph, its per-example outputs, and how to restore and read it.

    ``restored`` maps checkpoint names to the variables they restore; ``restore`` assigns them the
    values fed to ``restore_feeds`` (by the same names).
    """

    graph: tf.Graph
    outputs: Dict[str, tf.Tensor]
    restore: tf.Operation
    restore_feeds: Dict[str, tf.Tensor]
    read_errors: Callable[[], ContextManager[None]]
    restored: Dict[str, tf.Variable]


def _restore_op(restored: Dict[str, tf.Variable]) -> Tuple[tf.Operation, Dict[str, tf.Tensor]]:
    """One op assigning each variable of ``restored`` ({checkpoint name: variable}) the value fed by name."""
    feeds = {name: tf1.placeholder(variable.dtype.base_dtype, variable.shape) for name, variable in restored.items()}
    with tf.name_scope("restore"):
        return tf.group(*[tf1.assign(variable, feeds[name]) for name, variable in restored.items()]), feeds


def _classification_outputs(logits: tf.Tensor, labels: tf.Tensor, num_classes: int) -> Dict[str, tf.Tensor]:
    """The per-example loss, top-1 and top-5 hits of float32 ``logits``, as ``_sum_over_split`` sums them."""
    return {
        "loss": tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits),
        "top1": tf.math.in_top_k(targets=labels, predictions=logits, k=1),
        "top5": tf.math.in_top_k(targets=labels, predictions=logits, k=min(TOP_K, num_classes)),
    }


def _eval_batches(config: EvalConfig, dataset: DatasetSpec, preprocess: Callable,
                  image_size: int) -> Tuple[tf.Tensor, tf.Tensor]:
    """The split read once, preprocessed as evaluation does, in batches of ``--batch_size``."""
    options = InputOptions(
        batch_size=config.batch_size,
        image_size=image_size,
        is_training=False,
        num_preprocessing_threads=config.num_preprocessing_threads,
        labels_offset=config.labels_offset,
    )
    return next_batch(dataset, preprocess, options)


def _build(config: EvalConfig) -> _EvalGraph:
    """Build input, network (rewritten for mixed precision), per-example loss/top-k, and the saver."""
    graph = tf.Graph()
    with graph.as_default():
        dataset = get_dataset(config.dataset_name, config.dataset_split_name, config.dataset_dir or None)
        num_classes = dataset.num_classes - config.labels_offset
        network_fn, preprocess = network_and_preprocessing(
            config.model_name, config.preprocessing_name, num_classes, 0.0,
            is_training=False, use_grayscale=config.use_grayscale,
        )
        images, labels = _eval_batches(config, dataset, preprocess,
                                       input_size(config.eval_image_size, network_fn, "eval_image_size"))
        logits, _ = network_fn(images)
        if config.precision_options.mixed:
            report = rewrite(logits, config.precision_options.precision,
                             options=config.precision_options.rewrite_options(MeasuringTarget(training=False)))
            logging.info("%s", report.summary_text())
            if config.precision_options.mp_report:
                write_rewrite_reports([report], config.precision_options.mp_report)
            logits = report.remap(logits)
        outputs = _classification_outputs(tf.cast(logits, tf.float32), labels, num_classes)
        if config.moving_average_decay:
            averages = tf1.train.ExponentialMovingAverage(config.moving_average_decay)
            var_list = averages.variables_to_restore(slim.get_model_variables())
        else:
            var_list = {v.op.name: v for v in slim.get_variables_to_restore()}
        restore, restore_feeds = _restore_op(var_list)
        return _EvalGraph(graph, outputs, restore, restore_feeds, dataset.read_errors, var_list)


def _build_tflite(config: EvalConfig, model: TFLiteModel) -> _EvalGraph:
    """Build input and per-example loss/top-k around ``model``, which LiteRT runs on each batch (nothing to restore).

    The images are read and preprocessed exactly as for a checkpoint, at the model's input size.
    """
    flag = f"--checkpoint_path={config.checkpoint_path}"
    height, width, channels = model.input_shape[1:]
    if config.eval_image_size is not None and config.eval_image_size != height:
        raise ValueError(f"--eval_image_size={config.eval_image_size}: {flag} reads {height}x{width} images; "
                         "drop --eval_image_size (a TensorFlow Lite model reads the size it was exported with).")
    graph = tf.Graph()
    with graph.as_default():
        dataset = get_dataset(config.dataset_name, config.dataset_split_name, config.dataset_dir or None)
        num_classes = dataset.num_classes - config.labels_offset
        if num_classes != model.num_classes:
            raise ValueError(f"{flag} has {model.num_classes} classes, --dataset_name={config.dataset_name} "
                             f"{num_classes} (after --labels_offset={config.labels_offset}); pass the data set and "
                             "--labels_offset the model was exported for.")
        _, preprocess = network_and_preprocessing(
            config.model_name, config.preprocessing_name, num_classes, 0.0,
            is_training=False, use_grayscale=config.use_grayscale,
        )
        images, labels = _eval_batches(config, dataset, preprocess, height)
        if images.shape[-1] != channels:
            raise ValueError(f"{flag} reads {channels}-channel images, the preprocessing of --model_name="
                             f"{config.model_name} makes {images.shape[-1]}; pass the --model_name, "
                             "--preprocessing_name and --use_grayscale the model was exported for.")
        logits = tf1.numpy_function(lambda batch: model.outputs(batch)["logits"], [images], tf.float32,
                                    stateful=True, name="tflite_logits")
        logits.set_shape([None, num_classes])
        outputs = _classification_outputs(logits, labels, num_classes)
        return _EvalGraph(graph, outputs, tf.no_op(), {}, dataset.read_errors, {})


def _sum_over_split(
    built: _EvalGraph, checkpoint: CheckpointValues, max_num_batches: Optional[int], labels_offset: int
) -> Tuple[Dict[str, float], int]:
    """Run the outputs batch by batch until the split (or ``max_num_batches``) ends; return their sums and count."""
    sums = {"loss": 0.0, "top1": 0.0, "top5": 0.0}
    num_examples = num_batches = 0
    with tf1.Session(graph=built.graph) as session:
        session.run(built.restore, {built.restore_feeds[name]: value for name, value in checkpoint.values.items()})
        # A damaged input file, or a label made negative by --labels_offset, becomes a ValueError naming it.
        with built.read_errors(), negative_label_errors(labels_offset):
            while max_num_batches is None or num_batches < max_num_batches:
                try:
                    values = session.run(built.outputs)
                except tf.errors.OutOfRangeError:
                    break
                for key in sums:
                    sums[key] += float(np.sum(values[key], dtype=np.float64))
                num_examples += len(values["loss"])
                num_batches += 1
    return sums, num_examples


def write_eval_summaries(eval_dir: str, metrics: Dict[str, object]) -> None:
    """Write the metrics as TensorBoard scalars in ``eval_dir`` at the checkpoint's global step (0 if it has none)."""
    summary = tf1.Summary(value=[
        tf1.Summary.Value(tag=tag, simple_value=float(metrics[key])) for key, tag in SUMMARY_TAGS.items()
    ])
    with tf.Graph().as_default():  # FileWriter refuses to run eagerly
        writer = tf1.summary.FileWriter(eval_dir)
        try:
            writer.add_summary(summary, metrics["global_step"] or 0)
        finally:
            writer.close()


def _tflite_model(config: EvalConfig) -> TFLiteModel:
    """The TensorFlow Lite model ``--checkpoint_path`` names, loaded; ValueError naming the flag that does not apply.

    Its precision was chosen at export, so the options that choose a checkpoint's precision or
    weights are refused rather than ignored; ``--quantize`` asserts that the model is int8.
    """
    flag = f"--checkpoint_path={config.checkpoint_path}"
    typed = list(config.precision_options.typed_flags())
    if config.moving_average_decay:
        typed.append(f"--moving_average_decay={config.moving_average_decay}")
    if typed:
        raise ValueError(f"{typed[0]} does not apply to {flag}: a TensorFlow Lite model's weights and precision "
                         "were chosen at export (float32, --precision=float16 or --quantize); drop it.")
    model = load_tflite_model(config.checkpoint_path, "checkpoint_path")
    if config.quantize and not model.is_int8:
        raise ValueError(f"--quantize: {flag} is not an int8 model; drop --quantize, or export one with "
                         "export_inference_graph.py --quantize.")
    return model


def _tflite_built(config: EvalConfig) -> Tuple[_EvalGraph, CheckpointValues]:
    """The evaluation graph of the TensorFlow Lite model ``--checkpoint_path`` names (it holds no global step)."""
    model = _tflite_model(config)
    prepare_output_dir(config.eval_dir, "eval_dir")
    return _build_tflite(config, model), CheckpointValues(config.checkpoint_path, {}, None)


def _checkpoint_built(config: EvalConfig) -> Tuple[_EvalGraph, CheckpointValues]:
    """The evaluation graph of the checkpoint ``--checkpoint_path`` names, and the values it restores."""
    if config.quantize:
        raise ValueError("--quantize evaluates an int8 TensorFlow Lite model, not a checkpoint: export one with "
                         "export_inference_graph.py --quantize --output_file=model.tflite and pass "
                         "--checkpoint_path=model.tflite.")
    check_checkpoint_path(config.checkpoint_path)  # before the build: a wrong path is told at once
    prepare_output_dir(config.eval_dir, "eval_dir")
    built = _build(config)
    return built, read_checkpoint_values(config.checkpoint_path, built.restored, "eval_image_size")


def eval_step_settings(config: EvalConfig) -> StepSettings:
    """What sizes ``config``'s evaluation step, for the error of a step that runs out of memory."""
    return StepSettings(config.model_name, config.batch_size, config.precision_options.precision,
                        config.eval_image_size, "eval_image_size")


def evaluate(config: EvalConfig, print_line: Callable[[str], None] = print) -> Dict[str, object]:
    """Evaluate the checkpoint of ``config``; print the metrics, write them to ``eval_dir`` and return them.

    ``eval_dir`` receives ``metrics.json`` and a TensorBoard events file with the metrics at the
    checkpoint's global step, so evaluating successive checkpoints draws a curve. A ``--checkpoint_path``
    ending in ``.tflite`` is a TensorFlow Lite model (``export_inference_graph.py``): LiteRT runs it on the
    same batches, and the same metrics are written, with ``global_step`` None.
    """
    if config.master:
        raise ValueError(f"--master={config.master} is not yet supported (local evaluation only); use --master=''.")
    if config.max_num_batches is not None and config.max_num_batches < 1:
        raise ValueError(f"--max_num_batches={config.max_num_batches} must be >= 1; pass a positive count or unset it.")
    with out_of_memory_named(eval_step_settings(config)):
        build = _tflite_built if is_tflite_path(config.checkpoint_path) else _checkpoint_built
        built, checkpoint = build(config)
        sums, num_examples = _sum_over_split(built, checkpoint, config.max_num_batches, config.labels_offset)
    if num_examples == 0:
        raise ValueError(f"--dataset_split_name={config.dataset_split_name} has no examples; pick a non-empty split.")
    metrics = {
        "accuracy": sums["top1"] / num_examples,
        "top5": sums["top5"] / num_examples,
        "loss": sums["loss"] / num_examples,
        "num_examples": num_examples,
        "global_step": checkpoint.global_step,
        "checkpoint": checkpoint.prefix,
    }
    # Printed first, so a disk that refuses the files below does not lose the numbers.
    print_line(" ".join(f"{key}={value:.4f}" if isinstance(value, float) else f"{key}={value}"
                        for key, value in metrics.items()))
    with disk_write_errors(config.eval_dir, "eval_dir",
                           lambda: f"{checkpoint.prefix} is untouched (metrics printed above)"):
        write_json_atomically(os.path.join(config.eval_dir, METRICS_FILENAME), metrics)
        write_eval_summaries(config.eval_dir, metrics)
    return metrics
