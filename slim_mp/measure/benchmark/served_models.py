"""The files a serving benchmark times: frozen graphs and SavedModels, exported here or given, checked and loaded.

A served model is one file of ``export_inference_graph.py``: a frozen GraphDef (input placeholder
``input``, output ``probabilities``) or a SavedModel folder (signature ``serving_default``, input
``images``, output ``probabilities``), in the precision it was exported in. ``export_served_models``
makes them from a network's name through the exporter's own function (``export_model``), so the
benchmark times exactly what a user exports; without a checkpoint it first saves freshly initialised
weights to freeze (serving time does not depend on the weights' values). ``parse_served_models``
takes existing files instead (``precision:path`` items). ``check_served_model`` reads each file's
input shape without running it, so a bad file is one error before any work; ``load_served_model``
opens one in a session, as a server does.

Leaves alone: what the exporter decides (placement, weight storage): it is timed as it comes.
"""

import dataclasses
import os
from typing import Callable, List, Optional, Sequence, Tuple

import tensorflow as tf
from google.protobuf import message, text_format
from tensorflow.core.protobuf import config_pb2, saved_model_pb2

from slim_mp.config_fields import ArgumentError, argument
from slim_mp.export.exporter import export_model
from slim_mp.export.inference_graph import INPUT_NAME, OUTPUT_NAMES, ExportConfig
from slim_mp.export.saved_model import SIGNATURE_INPUT, SIGNATURE_KEY
from slim_mp.graph_pass import VARIABLE_OP_TYPES
from slim_mp.precision import precision_name
from slim_mp.training import PrecisionOptions

tf1 = tf.compat.v1

FROZEN_GRAPH = "frozen graph"
SAVED_MODEL = "SavedModel"
# The argument that takes existing files of each format, as ``precision:path`` items.
FORMAT_ARGUMENTS = {FROZEN_GRAPH: "frozen_graphs", SAVED_MODEL: "saved_models"}
# What a served model is asked for: the class probabilities, as a client of the export reads them.
OUTPUT_NAME = OUTPUT_NAMES[1]
SAVED_MODEL_FILE = "saved_model.pb"


@dataclasses.dataclass(frozen=True)
class ServedModel:
    """One exported file: its compute precision, format, path, bytes on disk and input shape (None: any size)."""

    precision: str
    format: str
    path: str
    size_bytes: int
    input_shape: Tuple[Optional[int], ...] = ()

    @property
    def fixed_batch(self) -> Optional[int]:
        """The one batch size the input takes, or None when the export left it open."""
        return self.input_shape[0] if self.input_shape else None


def size_on_disk(path: str) -> int:
    """Bytes of a file, or of every file under a folder (a SavedModel)."""
    if not os.path.isdir(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(folder, name)) for folder, _, names in os.walk(path) for name in names)


def parse_served_models(items: Sequence[str], served_format: str) -> List[ServedModel]:
    """``precision:path`` items of ``FORMAT_ARGUMENTS[served_format]`` as checked served models.

    Raises:
      ArgumentError: naming the argument for an item without a precision, an unknown precision, a
        precision given twice, or a missing path; ``check_served_model``'s errors for a bad file.
    """
    name = FORMAT_ARGUMENTS[served_format]
    models = []
    for item in items:
        precision, separator, path = item.partition(":")
        if not separator or not path:
            raise ArgumentError(f"{argument(name)}={item} is not precision:path; pass e.g. "
                                f"{argument(name)}=float32:fp32_model,bfloat16:bf16_model.")
        try:
            precision = precision_name(precision, allow_float32=True)
        except ValueError as error:
            raise ArgumentError(f"{argument(name)}={item}: {error}") from None
        if any(model.precision == precision for model in models):
            raise ArgumentError(f"{argument(name)} names {precision} twice; pass one file per precision.")
        if not os.path.exists(path):
            raise ArgumentError(f"{argument(name)}={item}: {path} does not exist; pass an exported "
                                f"{served_format} (scripts/export_inference_graph.py writes them).")
        models.append(check_served_model(ServedModel(precision, served_format, path, size_on_disk(path)), name))
    return models


def _read_graph_def(path: str, name: str) -> tf1.GraphDef:
    """The GraphDef in ``path``, binary or text (``--write_text_graphdef``); ArgumentError naming ``name``."""
    if os.path.isdir(path):
        raise ArgumentError(f"{argument(name)}: {path} is a folder; pass the frozen graph's .pb file "
                            f"(a SavedModel folder goes to {argument(FORMAT_ARGUMENTS[SAVED_MODEL])}).")
    try:
        with open(path, "rb") as handle:
            content = handle.read()
    except OSError as error:
        raise ArgumentError(f"{argument(name)}: {path} cannot be read ({error.strerror}).") from None
    graph_def = tf1.GraphDef()
    try:
        graph_def.ParseFromString(content)
    except message.DecodeError:
        graph_def.Clear()
    if not graph_def.node:  # not binary (or empty): a text GraphDef?
        try:
            text_format.Parse(content.decode("utf-8"), graph_def)
        except (text_format.ParseError, UnicodeDecodeError):
            raise ArgumentError(f"{argument(name)}: {path} is not a GraphDef (binary or text); pass the "
                                "frozen graph export_inference_graph.py --output_file wrote.") from None
    return graph_def


def _shape(shape_proto) -> Tuple[Optional[int], ...]:
    return tuple(None if dim.size < 0 else dim.size for dim in shape_proto.dim)


def _frozen_graph_input(path: str, name: str) -> Tuple[Optional[int], ...]:
    graph_def = _read_graph_def(path, name)
    nodes = {node.name: node for node in graph_def.node}
    for node_name in (INPUT_NAME, OUTPUT_NAME):
        if node_name not in nodes:
            raise ArgumentError(f"{argument(name)}: {path} has no node {node_name!r}; pass a graph "
                                f"export_inference_graph.py wrote (input {INPUT_NAME!r}, output {OUTPUT_NAME!r}).")
    if any(node.op in VARIABLE_OP_TYPES for node in graph_def.node):
        raise ArgumentError(f"{argument(name)}: {path} holds variables, not frozen weights; export it with "
                            "export_inference_graph.py --checkpoint_path.")
    return _shape(nodes[INPUT_NAME].attr["shape"].shape)


def _saved_model_input(path: str, name: str) -> Tuple[Optional[int], ...]:
    proto_path = os.path.join(path, SAVED_MODEL_FILE)
    if not os.path.isfile(proto_path):
        raise ArgumentError(f"{argument(name)}: {path} is not a SavedModel folder (no {SAVED_MODEL_FILE}); pass "
                            "the folder export_inference_graph.py --saved_model_dir wrote.")
    saved_model = saved_model_pb2.SavedModel()
    try:
        with open(proto_path, "rb") as handle:
            saved_model.ParseFromString(handle.read())
    except (OSError, message.DecodeError):
        raise ArgumentError(f"{argument(name)}: {proto_path} cannot be read as a SavedModel.") from None
    serving = [graph for graph in saved_model.meta_graphs if tf1.saved_model.SERVING in graph.meta_info_def.tags]
    signature = serving[0].signature_def.get(SIGNATURE_KEY) if serving else None
    if signature is None or SIGNATURE_INPUT not in signature.inputs or OUTPUT_NAME not in signature.outputs:
        raise ArgumentError(f"{argument(name)}: {path} has no '{SIGNATURE_KEY}' signature from {SIGNATURE_INPUT!r} "
                            f"to {OUTPUT_NAME!r} under the serve tag; pass a SavedModel export_inference_graph.py "
                            "wrote.")
    return _shape(signature.inputs[SIGNATURE_INPUT].tensor_shape)


def check_served_model(model: ServedModel, name: str) -> ServedModel:
    """``model`` with its input shape, read from the file without running it; ArgumentError naming ``name``
    for a file that is not such an export, or whose input has no fixed image size."""
    reader = _frozen_graph_input if model.format == FROZEN_GRAPH else _saved_model_input
    shape = reader(model.path, name)
    if len(shape) < 4 or any(size is None for size in shape[1:]):
        raise ArgumentError(f"{argument(name)}: {model.path} takes input of shape {list(shape)}; export it with "
                            "export_inference_graph.py and a fixed --image_size (the batch may stay open).")
    return dataclasses.replace(model, input_shape=shape)


@dataclasses.dataclass
class LoadedModel:
    """A served model open in its own session: feed ``images`` (host memory), fetch ``probabilities``."""

    session: tf1.Session
    images: tf.Tensor
    probabilities: tf.Tensor

    def predictor(self) -> Callable[[object], object]:
        """The call a server makes per request: one batch of images in, the probabilities out."""
        return self.session.make_callable(self.probabilities, feed_list=[self.images])


def load_served_model(model: ServedModel, session_config: Optional[config_pb2.ConfigProto] = None) -> LoadedModel:
    """Open ``model`` once, in a session of its own with ``session_config``, as a server does (closed again when
    loading fails)."""
    graph = tf.Graph()
    session = tf1.Session(graph=graph, config=session_config)
    try:
        with graph.as_default():
            if model.format == FROZEN_GRAPH:
                tf.graph_util.import_graph_def(_read_graph_def(model.path, FORMAT_ARGUMENTS[FROZEN_GRAPH]), name="")
                return LoadedModel(session, graph.get_tensor_by_name(f"{INPUT_NAME}:0"),
                                   graph.get_tensor_by_name(f"{OUTPUT_NAME}:0"))
            signature = tf1.saved_model.loader.load(session, [tf1.saved_model.SERVING], model.path).signature_def[
                SIGNATURE_KEY]
            return LoadedModel(session, graph.get_tensor_by_name(signature.inputs[SIGNATURE_INPUT].name),
                               graph.get_tensor_by_name(signature.outputs[OUTPUT_NAME].name))
    except BaseException:
        session.close()
        raise


def initial_weights_checkpoint(config: ExportConfig, folder: str) -> str:
    """Save freshly initialised weights of ``config``'s network in ``folder``; return the checkpoint prefix.

    The exporter writes its float32 graph with variables (no ``--checkpoint_path``); its own
    initialisers fill them, so the checkpoint holds exactly the variables every export restores.
    """
    graph_file = os.path.join(folder, "initial_graph.pb")
    export_model(dataclasses.replace(config, output_file=graph_file, checkpoint_path=None, saved_model_dir=None,
                                     write_text_graphdef=False, precision_options=PrecisionOptions()),
                 print_line=lambda line: None)
    graph_def = tf1.GraphDef()
    with open(graph_file, "rb") as handle:
        graph_def.ParseFromString(handle.read())
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
        variables = [op for op in graph.get_operations() if op.type in VARIABLE_OP_TYPES]
        initialisers = [graph.get_operation_by_name(f"{op.name}/Assign") for op in variables]
        saver = tf1.train.Saver({op.name: op.outputs[0] for op in variables})
        with tf1.Session(graph=graph) as session:
            session.run(initialisers)
            return saver.save(session, os.path.join(folder, "initial_weights"), write_meta_graph=False)


def export_served_models(config: ExportConfig, precisions: Sequence[str], folder: str,
                         print_line: Callable[[str], None]) -> List[ServedModel]:
    """Export ``config``'s network in float32 and each of ``precisions``, as a frozen graph and a SavedModel each,
    into ``folder``; ``config.checkpoint_path`` is frozen in (the caller makes one when the user gave none)."""
    models = []
    for precision in ("float32", *precisions):
        graph_file = os.path.join(folder, f"{precision}.pb")
        saved_model_dir = os.path.join(folder, f"{precision}_saved_model")
        export_model(dataclasses.replace(config, output_file=graph_file, saved_model_dir=saved_model_dir,
                                         precision_options=PrecisionOptions(precision=precision)), print_line)
        for served_format, path in ((FROZEN_GRAPH, graph_file), (SAVED_MODEL, saved_model_dir)):
            model = ServedModel(precision, served_format, path, size_on_disk(path))
            models.append(check_served_model(model, FORMAT_ARGUMENTS[served_format]))
    return models
