"""A checkpoint's TensorFlow Lite models side by side with its frozen float32 graph: bytes, top-1, agreement.

``compare_tflite`` exports the frozen float32 graph and the float32, float16 and int8 ``.tflite``
models (``export_model``, as the script does), reads a split through our dataset readers and the
network's evaluation preprocessing, and runs the frozen graph in TensorFlow (the reference) and each
model in LiteRT on the same images. Each row says the file's bytes and their ratio to the float32
model's, the top-1 accuracy of the ``classes`` output, and the fraction of images whose class equals
the frozen float32 graph's. ``scripts/tflite_report.py`` prints the rows as the table of
docs/operations.md; the slow test holds LeNet's rows to the bounds of issue 53.

Leaves alone: speed (LiteRT's CPU kernels are not what a phone runs; nothing here is timed).
"""

import dataclasses
import os
from typing import Dict, List

import numpy as np
import tensorflow as tf

from slim_mp.config_fields import option
from slim_mp.datasets import get_dataset
from slim_mp.export.exporter import export_model
from slim_mp.export.inference_graph import DEFAULT_CALIBRATION_SAMPLES, ExportConfig, read_graph_def
from slim_mp.markdown_table import markdown_table
from slim_mp.training import (INPUT_NAME, InputOptions, PrecisionOptions, load_tflite_model, make_dataset,
                              network_and_preprocessing)

tf1 = tf.compat.v1

KINDS = ("float32", "float16", "int8")
_BATCH = 500


@dataclasses.dataclass(frozen=True)
class ComparisonConfig(ExportConfig):
    """The export's options for ``checkpoint_path``, where to write the four files, and the split to compare on.

    The comparison writes every kind itself, so the options that pick one kind or one output are refused.
    """

    output_dir: str = option("", "The folder for the frozen float32 graph and the three .tflite models.")
    dataset_split_name: str = option("test", "The split the models are compared on.")


def check_comparison_config(config: ComparisonConfig) -> None:
    """Raise ValueError naming the flag that picks one kind or output, or a missing ``--output_dir``/checkpoint."""
    if not config.output_dir or not config.checkpoint_path:
        raise ValueError("--output_dir and --checkpoint_path are needed: the folder to write to and the weights.")
    for name in ("output_file", "saved_model_dir", "quantize", "write_text_graphdef"):
        if getattr(config, name):
            raise ValueError(f"--{name}={getattr(config, name)}: the comparison writes every kind of model itself "
                             "into --output_dir; drop it.")
    if config.precision_options != PrecisionOptions():
        raise ValueError("--precision and the --mp_* flags do not apply: the comparison exports float32, float16 and "
                         "int8 models itself; drop them.")


@dataclasses.dataclass(frozen=True)
class ComparedModel:
    """One file of the comparison: what it is, its bytes, its top-1 and its agreement with the frozen graph."""

    model: str
    kind: str
    path: str
    num_bytes: int
    size_ratio: float  # of the float32 .tflite model's bytes
    top1: float
    agreement: float  # fraction of images whose class equals the frozen float32 graph's


def _split_images(config: ExportConfig, split_name: str, image_size: int) -> Dict[str, np.ndarray]:
    """The split's images as evaluation preprocesses them, and its labels, in file order."""
    with tf.Graph().as_default():
        dataset = get_dataset(config.dataset_name, split_name, config.dataset_dir or None)
        _, preprocess = network_and_preprocessing(
            config.model_name, config.preprocessing_name, dataset.num_classes - config.labels_offset, 0.0,
            is_training=False, use_grayscale=config.use_grayscale,
        )
        options = InputOptions(batch_size=_BATCH, image_size=image_size, is_training=False,
                               labels_offset=config.labels_offset)
        images, labels = tf1.data.make_one_shot_iterator(make_dataset(dataset, preprocess, options)).get_next()
        batches = []
        with tf1.Session() as session, dataset.read_errors():
            while True:
                try:
                    batches.append(session.run([images, labels]))
                except tf.errors.OutOfRangeError:
                    break
    return {"images": np.concatenate([batch[0] for batch in batches]),
            "labels": np.concatenate([batch[1] for batch in batches])}


def _frozen_classes(path: str, images: np.ndarray) -> np.ndarray:
    """TensorFlow's ``classes`` of the frozen graph at ``path``, batch by batch."""
    with tf.Graph().as_default():
        tf1.import_graph_def(read_graph_def(path), name="")
        with tf1.Session() as session:
            return np.concatenate([session.run("classes:0", {f"{INPUT_NAME}:0": images[start:start + _BATCH]})
                                   for start in range(0, len(images), _BATCH)])


def compare_tflite(config: ComparisonConfig) -> List[ComparedModel]:
    """Export ``config``'s checkpoint as a frozen float32 graph and the three .tflite models in ``output_dir``;
    compare them on ``dataset_split_name``: the frozen graph's row first, then float32, float16 and int8."""
    check_comparison_config(config)
    output_dir = config.output_dir
    os.makedirs(output_dir, exist_ok=True)
    quiet = lambda line: None  # noqa: E731  (the rows say what was written)
    float32 = ExportConfig(**{field.name: getattr(config, field.name) for field in dataclasses.fields(ExportConfig)})
    frozen = os.path.join(output_dir, f"{config.model_name}_frozen_float32.pb")
    export_model(dataclasses.replace(float32, output_file=frozen), quiet)
    paths = {kind: os.path.join(output_dir, f"{config.model_name}_{kind}.tflite") for kind in KINDS}
    export_model(dataclasses.replace(float32, output_file=paths["float32"]), quiet)
    export_model(dataclasses.replace(float32, output_file=paths["float16"],
                                     precision_options=PrecisionOptions("float16")), quiet)
    export_model(dataclasses.replace(float32, output_file=paths["int8"], quantize=True), quiet)
    model = load_tflite_model(paths["float32"], "output_file")
    split = _split_images(float32, config.dataset_split_name, model.input_shape[1])
    reference = _frozen_classes(frozen, split["images"])
    float32_bytes = os.path.getsize(paths["float32"])
    rows = [_row(config.model_name, "frozen float32 graph", frozen, float32_bytes, reference, reference,
                 split["labels"])]
    for kind in KINDS:
        classes = load_tflite_model(paths[kind], "output_file").outputs(split["images"])["classes"]
        rows.append(_row(config.model_name, kind, paths[kind], float32_bytes, classes, reference, split["labels"]))
    return rows


def _row(model: str, kind: str, path: str, float32_bytes: int, classes: np.ndarray, reference: np.ndarray,
         labels: np.ndarray) -> ComparedModel:
    num_bytes = os.path.getsize(path)
    return ComparedModel(model, kind, path, num_bytes, num_bytes / float32_bytes,
                         float(np.mean(classes == labels)), float(np.mean(classes == reference)))


def comparison_table(rows: List[ComparedModel], calibration_samples: int = DEFAULT_CALIBRATION_SAMPLES) -> str:
    """The rows as the Markdown table of docs/operations.md."""
    return "\n".join(markdown_table(
        ["model", "file", "bytes", "× float32 .tflite", "top-1", "same class as the frozen float32 graph"],
        [[row.model, row.kind if row.kind != "int8" else f"int8 ({calibration_samples} calibration images)",
          f"{row.num_bytes:,}", f"{row.size_ratio:.2f}", f"{row.top1:.2%}", f"{row.agreement:.2%}"] for row in rows],
        align="llrrrr",
    ))
