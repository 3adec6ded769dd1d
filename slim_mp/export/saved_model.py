"""Write a frozen inference graph as a SavedModel that plain TensorFlow serves.

The SavedModel holds the frozen graph (weights are constants, so there are no variables) and one
``serving_default`` signature: a float32 image batch ``images`` in; ``logits``, ``probabilities``
and ``classes`` out. Loading it needs only TensorFlow (``tf.saved_model.load``), no slim_mp,
tf_slim or nets import: the rewritten graph uses standard ops only.
"""

import os
import shutil

import tensorflow as tf

from slim_mp.config_fields import ArgumentError, argument
from slim_mp.export.inference_graph import INPUT_NAME, OUTPUT_NAMES

tf1 = tf.compat.v1

SIGNATURE_KEY = "serving_default"
SIGNATURE_INPUT = "images"


def check_new_folder(path: str, argument_name: str) -> None:
    """``ArgumentError`` naming the argument ``argument_name`` unless ``path`` does not exist yet and its parent
    folder is writable."""
    named = f"{argument(argument_name)}={path}"
    if os.path.exists(path):
        raise ArgumentError(f"{named} already exists; pass a new folder (a SavedModel is never overwritten).")
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as error:
        raise ArgumentError(f"{named} cannot be created ({error.strerror}); pass a folder you can write to.") \
            from error
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ArgumentError(f"{named} cannot be created (no write permission in {parent}); "
                            "pass a folder you can write to.")


def write_saved_model(graph_def: tf1.GraphDef, export_dir: str) -> None:
    """Write frozen ``graph_def`` (input ``input``, outputs ``OUTPUT_NAMES``) as a SavedModel in ``export_dir``.

    It is built in a temporary sibling folder and renamed, so a failure leaves no half-written model.
    """
    temporary = f"{os.path.abspath(export_dir)}.tmp-{os.getpid()}"
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
        inputs = {SIGNATURE_INPUT: graph.get_tensor_by_name(f"{INPUT_NAME}:0")}
        outputs = {name: graph.get_tensor_by_name(f"{name}:0") for name in OUTPUT_NAMES}
        signature = tf1.saved_model.signature_def_utils.predict_signature_def(inputs, outputs)
        try:
            with tf1.Session(graph=graph) as session:
                builder = tf1.saved_model.Builder(temporary)
                builder.add_meta_graph_and_variables(
                    session, [tf1.saved_model.tag_constants.SERVING], signature_def_map={SIGNATURE_KEY: signature}
                )
                builder.save()
            os.rename(temporary, export_dir)
        finally:
            shutil.rmtree(temporary, ignore_errors=True)
