"""Build the inference graph of ``export_inference_graph.py``, rewritten for low precision, and freeze its weights.

The graph is the one TF-Slim's official script writes (a float32 placeholder named ``input`` of
shape ``[batch_size, image_size, image_size, channels]``, or ``[batch_size, num_frames, image_size,
image_size, channels]`` for a video network, feeding the network) plus three named float32 outputs,
so callers never see the compute precision: ``logits``, ``probabilities`` (softmax) and ``classes``
(top-1 class, int64). ``channels`` is what the network's preprocessing makes of the data set's
images (``preprocessing_factory.output_channels``: 1 for MNIST LeNet, 3 for RGB networks), so the
graph restores the checkpoints training writes. Variables are TF1 reference variables, as in the
official script's graph, so TensorFlow's own ``freeze_graph`` tool freezes the written GraphDef (it
fails on resource variables).
"""

import dataclasses
import os
from typing import Dict, Optional, Tuple

import tensorflow as tf
from absl import logging

from nets import nets_factory
from nets.preprocessing import preprocessing_factory
from slim_mp.datasets import OFFICIAL_DATASETS, get_dataset
from slim_mp.config_fields import ArgumentError, argument, option
from slim_mp.export.low_precision_weights import fold_weight_casts
from slim_mp.graph_pass import MeasuringTarget, PlacementMeasuring, RewriteReport, rewrite
from slim_mp.training import (
    INPUT_NAME, OUTPUT_NAMES, PrecisionOptions, check_model_name, input_size, is_tflite_path, reachable_graph_def,
)

tf1 = tf.compat.v1
# The networks whose input is a video clip [batch, frames, height, width, channels].
VIDEO_NETWORKS = frozenset({"i3d", "s3dg"})
# Train images that calibrate an int8 model's activation ranges (--quantize), one float forward pass each.
# TensorFlow's post-training quantization guide asks for a small subset, around 100 to 500 samples; on the
# bundled data the count from 25 to 500 moved LeNet's, CifarNet's and MobileNet v1's agreement with float32
# by at most 2.3 points with no upward trend (min/max ranges: more images, wider ranges), so the default
# sits inside the guide's range, for data sets with more classes than ours (docs/operations.md).
DEFAULT_CALIBRATION_SAMPLES = 200


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    """Options of one export (the field names are the flag names of ``export_inference_graph.py``).

    The first thirteen are TF-Slim's official flags with their defaults;
    ``checkpoint_path`` freezes weights into the graph, ``saved_model_dir`` also writes a SavedModel, and the
    precision options rewrite the graph for float16 / bfloat16 inference, its placement timed at
    ``serving_batch_sizes`` when ``batch_size`` is unset. An ``output_file`` ending in
    ``.tflite`` is a TensorFlow Lite model (``tflite_model``), int8 with ``quantize``, calibrated on
    ``calibration_samples`` train images preprocessed by ``preprocessing_name``.
    """

    model_name: str = option("inception_v3", "The name of the network to export (see nets/nets_factory.py).")
    is_training: bool = option(
        False, "Export the training-mode network (batch norm on batch statistics, dropout on)."
    )
    image_size: Optional[int] = option(
        None, "The image size of the exported input; unset means the network's default."
    )
    batch_size: Optional[int] = option(
        None, "Batch size of the exported model; unset lets callers choose it at run time."
    )
    dataset_name: str = option("imagenet", "The data set the model was trained on (gives the number of classes).")
    labels_offset: int = option(
        0, "An offset subtracted from the number of classes (e.g. 1 for ImageNet checkpoints without background)."
    )
    output_file: str = option("", "Where to write the inference graph (GraphDef).")
    dataset_dir: str = option(
        "", "Folder of the dataset files, read only to count classes (unset for official and bundled data sets)."
    )
    quantize: bool = option(
        False, "Write a fully int8 TensorFlow Lite model (--output_file=....tflite), float32 input and outputs, "
        "calibrated on --calibration_samples train images."
    )
    is_video_model: bool = option(
        False, "Export a video network (i3d, s3dg): the input is [batch, --num_frames, size, size, channels]."
    )
    num_frames: Optional[int] = option(None, "The number of frames of the video input; needed with --is_video_model.")
    write_text_graphdef: bool = option(False, "Write the graph as a text GraphDef instead of a binary one.")
    use_grayscale: bool = option(False, "Export a network that reads single-channel (grayscale) images.")
    checkpoint_path: Optional[str] = option(
        None, "Checkpoint file, or folder whose latest checkpoint is frozen into the graph; unset writes the graph "
        "without weights."
    )
    saved_model_dir: Optional[str] = option(
        None, "Also write a SavedModel (signature serving_default) to this new folder."
    )
    calibration_samples: int = option(
        DEFAULT_CALIBRATION_SAMPLES, "With --quantize: how many train images (a seeded random sample) calibrate the "
        "int8 ranges."
    )
    preprocessing_name: Optional[str] = option(
        None, "With --quantize: the preprocessing of the calibration images, as in evaluation; unset means the one "
        "of --model_name."
    )
    serving_batch_sizes: Tuple[int, ...] = option(
        PlacementMeasuring().serving_batch_sizes, "Without --batch_size: the batch sizes the measured placement "
        "times the low-precision graph at (comma-separated); an op runs low only where that pays at every one."
    )
    precision_options: PrecisionOptions = dataclasses.field(default_factory=PrecisionOptions)


@dataclasses.dataclass(frozen=True)
class InferenceGraph:
    """The built graph, its input and output tensors, and the pass's report (None for float32)."""

    graph: tf.Graph
    images: tf.Tensor
    outputs: Dict[str, tf.Tensor]
    report: Optional[RewriteReport]


def check_export_config(config: ExportConfig) -> None:
    """Raise ValueError naming the flag for options this exporter cannot honour, before any work."""
    if config.quantize and not is_tflite_path(config.output_file):
        raise ValueError(f"--quantize writes an int8 TensorFlow Lite model: pass --output_file=model.tflite (not "
                         f"{config.output_file or 'empty'}), or drop --quantize and export --precision=bfloat16 / "
                         "float16 for a smaller graph.")
    if not config.output_file and not config.saved_model_dir:
        raise ValueError("--output_file is empty; pass the path to write the graph to (or --saved_model_dir).")
    if config.saved_model_dir and not config.checkpoint_path:
        raise ValueError("--saved_model_dir needs trained weights; pass --checkpoint_path too.")
    for flag, value in (("image_size", config.image_size), ("batch_size", config.batch_size)):
        if value is not None and value < 1:
            raise ValueError(f"--{flag}={value} must be a positive integer, or unset.")
    if config.labels_offset < 0:
        raise ValueError(f"--labels_offset={config.labels_offset} must be >= 0.")
    PlacementMeasuring(serving_batch_sizes=config.serving_batch_sizes)  # ArgumentError unless positive sizes
    check_model_name(config.model_name)
    _check_video_options(config)


def _check_video_options(config: ExportConfig) -> None:
    """Raise ValueError naming the flag unless ``--is_video_model``/``--num_frames`` fit the network."""
    is_video_network = config.model_name in VIDEO_NETWORKS
    if config.is_video_model and not is_video_network:
        raise ValueError(f"--is_video_model: --model_name={config.model_name} reads images, not video clips; drop "
                         f"--is_video_model (video networks: {', '.join(sorted(VIDEO_NETWORKS))}).")
    if is_video_network and not config.is_video_model:
        raise ValueError(f"--model_name={config.model_name} reads video clips; pass --is_video_model and "
                         "--num_frames (e.g. --num_frames=64).")
    if config.is_video_model and not config.num_frames:
        raise ValueError("--is_video_model needs the clip length: pass --num_frames (e.g. --num_frames=64).")
    if config.num_frames is not None and config.num_frames < 1:
        raise ValueError(f"--num_frames={config.num_frames} must be a positive integer.")
    if config.num_frames and not config.is_video_model:
        logging.warning("--num_frames=%d is ignored without --is_video_model (as in the official script).",
                        config.num_frames)


def _classes_and_channels(config: ExportConfig) -> Tuple[int, Optional[int]]:
    """Classes of ``--dataset_name`` minus ``--labels_offset``, and its images' channels (None if they vary).

    Official data sets need no files for this.
    """
    if config.dataset_name in OFFICIAL_DATASETS:
        official = OFFICIAL_DATASETS[config.dataset_name]
        total, channels = official.num_classes, official.image_shape[2]
    else:
        dataset = get_dataset(config.dataset_name, "train", config.dataset_dir or None)
        total, channels = dataset.num_classes, dataset.image_shape[2]
    if total - config.labels_offset < 1:
        raise ValueError(f"--labels_offset={config.labels_offset} leaves no class of {config.dataset_name}; lower it.")
    return total - config.labels_offset, channels


def _input_channels(config: ExportConfig, data_channels: Optional[int]) -> int:
    """The channels the network reads when trained on ``--dataset_name`` with its own preprocessing."""
    if config.model_name not in preprocessing_factory.PREPROCESSING_MODULES:  # video networks: RGB clips
        return 1 if config.use_grayscale else 3
    return preprocessing_factory.output_channels(config.model_name, data_channels, config.use_grayscale)


def build_inference_graph(config: ExportConfig) -> InferenceGraph:
    """Build input placeholder, network (rewritten for ``config``'s precision) and the float32 outputs."""
    graph = tf.Graph()
    precision = config.precision_options
    num_classes, data_channels = _classes_and_channels(config)
    with graph.as_default(), tf1.variable_scope(tf1.get_variable_scope(), use_resource=False):
        network_fn = nets_factory.get_network_fn(
            config.model_name, num_classes=num_classes, is_training=config.is_training
        )
        size = input_size(config.image_size, network_fn, "image_size")
        channels = _input_channels(config, data_channels)
        frames = [config.num_frames] if config.is_video_model else []
        images = tf1.placeholder(tf.float32, [config.batch_size, *frames, size, size, channels], name=INPUT_NAME)
        logits, _ = network_fn(images)
        report = None
        if precision.mixed:
            options = precision.rewrite_options(MeasuringTarget(training=False, frozen_weights=True),
                                                serving_batch_sizes=config.serving_batch_sizes)
            report = rewrite(logits, precision.precision, include_update_ops=False, options=options)
            logits = report.remap(logits)
        logits = tf.identity(tf.cast(logits, tf.float32), name=OUTPUT_NAMES[0])
        outputs = {
            "logits": logits,
            "probabilities": tf.nn.softmax(logits, name=OUTPUT_NAMES[1]),
            "classes": tf.argmax(logits, axis=-1, name=OUTPUT_NAMES[2]),
        }
    return InferenceGraph(graph, images, outputs, report)


def _restore(built: InferenceGraph, session: tf1.Session, checkpoint: str, model_name: str) -> None:
    """Restore every variable of the inference graph; ValueError naming the flags for another model's checkpoint."""
    saver = tf1.train.Saver(tf1.global_variables())
    try:
        saver.restore(session, checkpoint)
    except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as error:
        raise ValueError(
            f"--checkpoint_path={checkpoint} does not hold the variables of --model_name={model_name} "
            f"({type(error).__name__}); check --model_name, --dataset_name and --labels_offset."
        ) from error


def freeze_graph(built: InferenceGraph, checkpoint: str, model_name: str) -> tf1.GraphDef:
    """Return the graph with ``checkpoint``'s weights as constants, pruned to the outputs.

    Weights read by low-precision ops are stored in that precision (see ``fold_weight_casts``).
    """
    with tf1.Session(graph=built.graph) as session:
        _restore(built, session, checkpoint, model_name)
        frozen = tf1.graph_util.convert_variables_to_constants(
            session, built.graph.as_graph_def(), list(OUTPUT_NAMES)
        )
    return reachable_graph_def(fold_weight_casts(frozen), OUTPUT_NAMES)


def check_writable_file(path: str, argument_name: str) -> None:
    """Create ``path``'s folder if needed and check a file can be written there; ``ArgumentError`` naming the
    argument ``argument_name``."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        probe = os.path.join(folder, f".{os.path.basename(path)}.probe-{os.getpid()}")
        with open(probe, "wb"):
            pass
        os.remove(probe)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ArgumentError(f"{argument(argument_name)}={path} cannot be written ({reason}); pass a path in a folder "
                            "you can write to.") from error


def write_graph_def(graph_def: tf1.GraphDef, path: str, as_text: bool) -> None:
    """Write ``graph_def`` to ``path`` (binary, or text with ``--write_text_graphdef``) via a temporary file."""
    temporary = f"{path}.tmp-{os.getpid()}"
    tf.io.write_graph(graph_def, os.path.dirname(os.path.abspath(path)), os.path.basename(temporary), as_text=as_text)
    os.replace(temporary, path)


def read_graph_def(path: str) -> tf1.GraphDef:
    """The binary GraphDef at ``path`` (a frozen graph ``write_graph_def`` wrote)."""
    graph_def = tf1.GraphDef()
    with open(path, "rb") as handle:
        graph_def.ParseFromString(handle.read())
    return graph_def
