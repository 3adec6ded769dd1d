"""The frozen float32 inference graph as a TensorFlow Lite model, through TensorFlow's own converter.

``export_inference_graph.py --output_file=model.tflite`` freezes the float32 graph
(``inference_graph``) and hands it to ``tf.compat.v1.lite.TFLiteConverter.from_frozen_graph``:

- float32 (the default): the graph as it is;
- ``--precision=float16``: the converter's float16 post-training quantization: weights stored in
  float16 (half the bytes), input, outputs and CPU compute float32 (a GPU delegate computes in float16);
- ``--quantize``: full-integer post-training quantization: int8 weights and activations, their
  ranges calibrated on ``--calibration_samples`` images of the data set's train split, read by our
  dataset readers and preprocessed as evaluation preprocesses them; the converter adds a quantize
  op after the float32 input and a dequantize op before each float32 output, so callers do not change.

The model keeps the frozen graph's names: input ``input`` (float32, batch -1 unless ``--batch_size``),
outputs ``logits`` and ``probabilities`` (float32) and ``classes`` (int64, the argmax; in an int8
model it is taken over the int8 logits, so it picks the first of logits equal after quantization).
``--precision=bfloat16`` has no TensorFlow Lite form (its weights are float32 or float16 or integer).

Leaves alone: the converter's numerics and op support. An op TensorFlow Lite's built-in ops lack
(the video networks' MaxPool3D and AvgPool3D) is one error naming it; TensorFlow-kernel fallback
("Select TF ops") is not enabled, because LiteRT's interpreter does not run those ops.
"""

import collections
import contextlib
import os
import re
import sys
import tempfile
from typing import Callable, Dict, Iterator, List, Optional

import numpy as np
import tensorflow as tf

from slim_mp.datasets import get_dataset
from slim_mp.export.inference_graph import ExportConfig, InferenceGraph, write_graph_def
from slim_mp.training import (INPUT_NAME, OUTPUT_NAMES, SHUFFLE_BUFFER_IMAGES, InputOptions, make_dataset,
                              network_and_preprocessing)

tf1 = tf.compat.v1

CALIBRATION_SEED = 0  # the same sample, hence the same int8 model, on every export of the same checkpoint
FLOAT16 = "float16"
INT8 = "int8"


def tflite_precision(config: ExportConfig) -> str:
    """What the model stores: ``float32``, ``float16`` (weights) or ``int8`` (``--quantize``)."""
    return INT8 if config.quantize else config.precision_options.precision


def stored_as(config: ExportConfig, model: bytes) -> str:
    """What ``model``, converted for ``config``, stores and computes in, for the line an export prints."""
    precision = tflite_precision(config)
    if precision != INT8:
        return "float32" if precision == "float32" else "float16 weights, float32 input, outputs and CPU compute"
    kept = float32_ops(model)
    exceptions = (f" except {', '.join(f'{op} x{count}' for op, count in sorted(kept.items()))} (no int8 kernel: "
                  "kept float32 by the converter)") if kept else ""
    return (f"int8 weights and activations{exceptions}, calibrated on {config.calibration_samples} train images; "
            "float32 input and outputs")


def check_tflite_config(config: ExportConfig) -> None:
    """Raise ValueError naming the flag for options a TensorFlow Lite export cannot honour, before any work."""
    output = f"--output_file={config.output_file}"
    precision = config.precision_options.precision
    if precision == "bfloat16":
        raise ValueError(f"--precision=bfloat16: {output} is a TensorFlow Lite model, which stores no bfloat16 "
                         "weights; pass --precision=float16 (float16 weights, half the bytes) or --quantize (int8, "
                         "a quarter), or write a frozen graph (.pb) for bfloat16.")
    if config.quantize and precision != "float32":
        raise ValueError(f"--quantize with --precision={precision}: an int8 model has no float16 weights; drop one.")
    if not config.checkpoint_path:
        raise ValueError(f"{output} needs trained weights: pass --checkpoint_path.")
    if config.quantize and config.is_video_model:
        raise ValueError("--quantize with --is_video_model: the int8 calibration reads the data set's images, and "
                         "slim_mp's data sets hold no video clips; drop --quantize (float32, or --precision=float16).")
    for flag, typed in (("saved_model_dir", config.saved_model_dir), ("write_text_graphdef",
                                                                       config.write_text_graphdef)):
        if typed:
            raise ValueError(f"--{flag} with {output}: a TensorFlow Lite export writes the one .tflite file; "
                             "export again with --output_file=....pb for a graph or SavedModel.")
    pass_flags = [flag for flag in config.precision_options.typed_flags() if not flag.startswith("--precision=")]
    if config.serving_batch_sizes != ExportConfig().serving_batch_sizes:
        pass_flags.append(f"--serving_batch_sizes={','.join(map(str, config.serving_batch_sizes))}")
    if pass_flags:
        raise ValueError(f"{pass_flags[0]} with {output}: the converter, not slim_mp's graph pass, makes a "
                         "TensorFlow Lite model low precision; drop it.")
    if config.calibration_samples < 1:
        raise ValueError(f"--calibration_samples={config.calibration_samples} must be a positive integer.")


def calibration_images(config: ExportConfig, built: InferenceGraph) -> Callable[[], Iterator[List[np.ndarray]]]:
    """The converter's representative data set: ``--calibration_samples`` train images, one at a time.

    A seeded shuffle of the train split, preprocessed by the network's evaluation preprocessing at
    the exported input size, exactly as ``eval_image_classifier.py`` feeds the network.
    """
    size = built.images.shape[-2]
    graph = tf.Graph()
    with graph.as_default():
        dataset = get_dataset(config.dataset_name, "train", config.dataset_dir or None)
        _, preprocess = network_and_preprocessing(
            config.model_name, config.preprocessing_name, dataset.num_classes - config.labels_offset, 0.0,
            is_training=False, use_grayscale=config.use_grayscale,
        )
        source = dataset.make_dataset(shuffle_files=True, seed=CALIBRATION_SEED)
        source = source.shuffle(min(dataset.num_samples, SHUFFLE_BUFFER_IMAGES), seed=CALIBRATION_SEED)
        options = InputOptions(batch_size=1, image_size=size, is_training=False)
        batches = make_dataset(dataset, preprocess, options, source.take(config.calibration_samples))
        images, _ = tf1.data.make_one_shot_iterator(batches).get_next()
    if images.shape[-1] != built.images.shape[-1]:
        raise ValueError(f"--preprocessing_name={config.preprocessing_name or config.model_name} makes "
                         f"{images.shape[-1]}-channel images, the exported network reads {built.images.shape[-1]}; "
                         "pass the --preprocessing_name and --use_grayscale the model was trained with.")

    def representative_data() -> Iterator[List[np.ndarray]]:
        with tf1.Session(graph=graph) as session, dataset.read_errors():
            while True:
                try:
                    yield [session.run(images)]
                except tf.errors.OutOfRangeError:
                    return

    return representative_data


@contextlib.contextmanager
def _native_stderr_to(path: str) -> Iterator[None]:
    """Within the block, descriptor 2 (where the converter's C++ code prints its diagnostics) writes to ``path``.

    On success those lines are notes (the calibrator's settings); on failure the error names their content.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "wb") as capture:
        os.dup2(capture.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


_FIRST_NODE = re.compile(r'loc\(fused\["(\w+):", "([^"]+)"\]\)')


def _unconvertible_ops_message(error: Exception, model_name: str) -> str:
    """One sentence naming the op types (and a node of each) that the converter could not take."""
    counts = collections.Counter(data.operator.name.removeprefix("tf.") for data in getattr(error, "errors", [])
                                 if data.operator.name)
    if not counts:
        lines = [line.strip() for line in str(error).splitlines() if "error" in line.lower()]
        return (f"--model_name={model_name} cannot be converted to TensorFlow Lite: the converter says "
                f"{(lines or [type(error).__name__])[0]!r}; export a frozen graph (.pb) or a SavedModel instead.")
    nodes = dict(reversed(_FIRST_NODE.findall(str(error))))
    listed = ", ".join(f"{op} ({count} node{'s' if count > 1 else ''}, e.g. {nodes[op]})" if op in nodes
                       else f"{op} ({count})" for op, count in sorted(counts.items()))
    return (f"--model_name={model_name} cannot be converted to TensorFlow Lite: its graph uses {listed}, which "
            "TensorFlow Lite's built-in ops lack; export a frozen graph (--output_file=....pb) or a SavedModel for "
            "TensorFlow instead.")


def convert_to_tflite(graph_def: tf1.GraphDef, config: ExportConfig,
                      representative_data: Optional[Callable[[], Iterator[List[np.ndarray]]]]) -> bytes:
    """The TensorFlow Lite model of frozen float32 ``graph_def`` in ``tflite_precision(config)``.

    ``representative_data`` (``calibration_images``) calibrates an int8 model; None for the others.

    Raises:
      ValueError: naming the ops TensorFlow Lite lacks (the converter's own diagnostics are not shown).
    """
    precision = tflite_precision(config)
    with tempfile.TemporaryDirectory(prefix="slim_mp_tflite_") as folder:
        frozen = os.path.join(folder, "frozen.pb")
        write_graph_def(graph_def, frozen, as_text=False)
        converter = tf1.lite.TFLiteConverter.from_frozen_graph(frozen, [INPUT_NAME], list(OUTPUT_NAMES))
        if precision != "float32":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if precision == FLOAT16:
            converter.target_spec.supported_types = [tf.float16]
        if precision == INT8:
            converter.representative_dataset = representative_data
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.inference_input_type = tf.float32
            converter.inference_output_type = tf.float32
        log = os.path.join(folder, "converter.log")
        try:
            with _native_stderr_to(log):
                return converter.convert()
        except Exception as error:
            # TensorFlow's API does not export the class (tensorflow.lite.python.convert_phase.ConverterError).
            if type(error).__name__ == "ConverterError":
                raise ValueError(_unconvertible_ops_message(error, config.model_name)) from error
            with open(log, encoding="utf-8", errors="replace") as captured:
                sys.stderr.write(captured.read())  # what the converter said before an unexpected failure
            raise


# An int8 model's float32 boundary: its input's quantize, its outputs' dequantize, the argmax of the dequantized logits.
_BOUNDARY_OPS = frozenset({"QUANTIZE", "DEQUANTIZE", "ARG_MAX"})


def float32_ops(model: bytes) -> Dict[str, int]:
    """{TensorFlow Lite op: count} of the ops of an int8 ``model`` that still read float32 tensors.

    The converter keeps an op without an int8 kernel in float32 between a dequantize and a quantize
    op (CifarNet's LOCAL_RESPONSE_NORMALIZATION) instead of failing, so a "fully int8" model may not
    be; the export says which. The flatbuffer is read with TensorFlow's own schema tools.
    """
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    names = {code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
    parsed = flatbuffer_utils.convert_bytearray_to_object(bytearray(model))
    counts: Dict[str, int] = collections.Counter()
    for subgraph in parsed.subgraphs:
        for operator in subgraph.operators:
            code = parsed.operatorCodes[operator.opcodeIndex]
            name = names[max(code.builtinCode, code.deprecatedBuiltinCode)]
            types = {subgraph.tensors[index].type for index in operator.inputs if index >= 0}
            if name not in _BOUNDARY_OPS and schema.TensorType.FLOAT32 in types:
                counts[name] += 1
    return dict(counts)


def write_tflite_model(model: bytes, path: str) -> None:
    """Write ``model`` to ``path`` through a temporary file, so a failure leaves no half-written model."""
    temporary = f"{path}.tmp-{os.getpid()}"
    try:
        with open(temporary, "wb") as handle:
            handle.write(model)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
