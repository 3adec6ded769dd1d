"""Run a TensorFlow Lite model (``export_inference_graph.py --output_file=model.tflite``) with LiteRT's interpreter.

The interpreter is LiteRT's (``ai_edge_litert``, PyPI ``ai-edge-litert``), not ``tf.lite.Interpreter``:
TensorFlow 2.21 still ships the latter but warns at every use that it is deprecated and "scheduled
for deletion in TF 2.20", a release already past, and points to LiteRT, the runtime Google now
maintains for TensorFlow Lite models (the one phones run, released on its own schedule). LiteRT is
an optional dependency (``pip install -e .[tflite]``; ``make install`` installs it); without it a
``.tflite`` path is one error naming the install command.

``TFLiteModel.outputs`` runs a batch of any size: a model exported without ``--batch_size`` (batch
-1 in its shape signature) is resized to the batch; one with a fixed batch runs in chunks of that
size, the last one padded, and the padding's outputs dropped.

Leaves alone: how the model was made (the converter is TensorFlow's, in ``slim_mp.export``), and
the model's numerics: an int8 model's float32 outputs are what its dequantize ops give.
"""

import dataclasses
import os
from typing import Dict, Tuple

import numpy as np

from slim_mp.config_fields import ArgumentError, argument
from slim_mp.training.served_names import INPUT_NAME, OUTPUT_NAMES

INSTALL_LITERT = "pip install 'ai-edge-litert==2.3.0' (or `pip install -e .[tflite]`, or `make install`)"


@dataclasses.dataclass
class TFLiteModel:
    """One model in a LiteRT interpreter: its float32 ``input`` and its outputs by name.

    ``input_shape`` is the input's shape signature (-1 where any size goes, as the batch of a model
    exported without ``--batch_size``).
    """

    path: str
    interpreter: object
    input_index: int
    input_shape: Tuple[int, ...]
    output_indices: Dict[str, int]
    is_int8: bool

    @property
    def num_classes(self) -> int:
        """The width of the ``logits`` output."""
        details = {detail["index"]: detail for detail in self.interpreter.get_output_details()}
        return int(details[self.output_indices["logits"]]["shape_signature"][-1])

    def outputs(self, images: np.ndarray) -> Dict[str, np.ndarray]:
        """``{name: array}`` of every output for the float32 batch ``images``."""
        fixed_batch = self.input_shape[0]
        if fixed_batch == -1:
            return self._invoke(images)
        chunks = []
        for start in range(0, len(images), fixed_batch):
            chunk = images[start:start + fixed_batch]
            padding = np.zeros((fixed_batch - len(chunk), *chunk.shape[1:]), chunk.dtype)
            chunks.append({name: value[:len(chunk)]
                           for name, value in self._invoke(np.concatenate([chunk, padding])).items()})
        return {name: np.concatenate([chunk[name] for chunk in chunks]) for name in self.output_indices}

    def _invoke(self, images: np.ndarray) -> Dict[str, np.ndarray]:
        current = tuple(self.interpreter.get_input_details()[0]["shape"])
        if current != images.shape:
            self.interpreter.resize_tensor_input(self.input_index, images.shape)
            self.interpreter.allocate_tensors()
        self.interpreter.set_tensor(self.input_index, np.ascontiguousarray(images, np.float32))
        self.interpreter.invoke()
        return {name: self.interpreter.get_tensor(index).copy() for name, index in self.output_indices.items()}


def _interpreter_class() -> type:
    """LiteRT's ``Interpreter``; ValueError naming the install command when LiteRT is not installed."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError as error:
        raise ValueError(f"TensorFlow Lite models run with LiteRT, which is not installed ({error}); install it: "
                         f"{INSTALL_LITERT}.") from error
    return Interpreter


def load_tflite_model(path: str, argument_name: str) -> TFLiteModel:
    """Load ``path`` in a LiteRT interpreter using every CPU this process may run on; ``ArgumentError`` naming the
    argument ``argument_name`` for a missing file, a file that is not a TensorFlow Lite model, or one without our
    input and outputs."""
    named = argument(argument_name)
    interpreter_class = _interpreter_class()
    if not os.path.isfile(path):
        raise ArgumentError(f"{named}={path} does not exist; pass a .tflite file export_inference_graph.py wrote.")
    try:
        interpreter = interpreter_class(model_path=path, num_threads=len(os.sched_getaffinity(0)))
        interpreter.allocate_tensors()
    except (ValueError, RuntimeError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ArgumentError(f"{named}={path} is not a TensorFlow Lite model LiteRT can run ({reason}); pass a .tflite "
                         "file export_inference_graph.py wrote.") from error
    inputs = interpreter.get_input_details()
    outputs = {detail["name"]: detail["index"] for detail in interpreter.get_output_details()}
    missing = [name for name in OUTPUT_NAMES if name not in outputs]
    if len(inputs) != 1 or inputs[0]["name"] != INPUT_NAME or missing:
        raise ArgumentError(f"{named}={path} is not an image classifier of export_inference_graph.py (input "
                         f"{[detail['name'] for detail in inputs]}, outputs {sorted(outputs)}; expected input "
                         f"'{INPUT_NAME}' and outputs {', '.join(OUTPUT_NAMES)}).")
    is_int8 = any(detail["dtype"] == np.int8 for detail in interpreter.get_tensor_details())
    return TFLiteModel(path, interpreter, inputs[0]["index"], tuple(int(d) for d in inputs[0]["shape_signature"]),
                       {name: outputs[name] for name in OUTPUT_NAMES}, is_int8)
