"""The official export workflow: our exported GraphDef, then TensorFlow's own ``freeze_graph`` tool.

As the docstring of the official ``export_inference_graph.py`` shows: export the graph without weights,
then ``python -m tensorflow.python.tools.freeze_graph --input_graph=... --input_checkpoint=...
--input_binary=true --output_graph=... --output_node_names=...``. The frozen graph's outputs are
compared with the checkpointed LeNet run here in float32 (resource variables, restored by a Saver).
"""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from script_runs import trained_lenet
from slim_mp.datasets.fashion_mnist import load_bundled
from slim_mp.export.exporter import export_model
from slim_mp.export.inference_graph import ExportConfig
from slim_mp.training.precision_flags import PrecisionOptions

tf1 = tf.compat.v1
TEST_IMAGES, _ = load_bundled("test")
NUM_IMAGES = 200
FLOAT32_RTOL, FLOAT32_ATOL = 1e-5, 1e-5  # the same float32 computation; only op scheduling may differ
BFLOAT16_ATOL_OF_SCALE = 0.03  # bfloat16 keeps ~3 significant digits
OUTPUT_NODES = "logits,probabilities,LeNet/Predictions/Reshape_1"  # ours and the official end point's name


def lenet_inputs() -> np.ndarray:
    """Test images as LeNet's preprocessing makes them: one channel, [0, 255] -> [-1, 1)."""
    return (TEST_IMAGES[:NUM_IMAGES, ..., np.newaxis].astype(np.float32) - 128.0) / 128.0


def checkpoint_logits(checkpoint: str, images: np.ndarray) -> np.ndarray:
    """LeNet's float32 logits with ``checkpoint``'s weights, built and restored here."""
    from nets import lenet  # imported late: the package import applies the tf_slim fixes first

    with tf.Graph().as_default():
        with slim.arg_scope(lenet.lenet_arg_scope()):
            logits, _ = lenet.lenet(tf.constant(images), num_classes=10, is_training=False)
        with tf1.Session() as session:
            tf1.train.Saver(slim.get_model_variables()).restore(session, checkpoint)
            return session.run(logits)


def freeze_with_tensorflow_tool(graph_path: str, checkpoint: str, output_path: str) -> None:
    process = subprocess.run(
        [sys.executable, "-m", "tensorflow.python.tools.freeze_graph", f"--input_graph={graph_path}",
         f"--input_checkpoint={checkpoint}", "--input_binary=true", f"--output_graph={output_path}",
         f"--output_node_names={OUTPUT_NODES}"],
        capture_output=True, text=True, timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]


def run_frozen(path: str, images: np.ndarray) -> dict:
    graph_def = tf1.GraphDef()
    with open(path, "rb") as handle:
        graph_def.ParseFromString(handle.read())
    assert not [node.name for node in graph_def.node if node.op in ("VariableV2", "VarHandleOp")]
    with tf.Graph().as_default() as graph:
        tf1.import_graph_def(graph_def, name="")
        with tf1.Session(graph=graph) as session:
            logits, probabilities, official = session.run(
                ["logits:0", "probabilities:0", "LeNet/Predictions/Reshape_1:0"], {"input:0": images})
    return {"logits": logits, "probabilities": probabilities, "official_predictions": official}


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_freeze_graph_freezes_the_exported_graph_and_matches_the_checkpoint(precision, tmp_path_factory):
    train_dir = trained_lenet(str(tmp_path_factory.mktemp("freeze_runs"))).train_dir
    checkpoint = tf.train.latest_checkpoint(train_dir)
    folder = tmp_path_factory.mktemp(f"freeze_{precision}")
    graph_path, frozen_path = str(folder / "lenet_graph.pb"), str(folder / "frozen.pb")
    export_model(ExportConfig(model_name="lenet", dataset_name="fashion_mnist", output_file=graph_path,
                              precision_options=PrecisionOptions(precision)), print_line=lambda line: None)
    freeze_with_tensorflow_tool(graph_path, checkpoint, frozen_path)
    images = lenet_inputs()
    frozen = run_frozen(frozen_path, images)
    expected = checkpoint_logits(checkpoint, images)
    assert frozen["logits"].dtype == np.float32
    if precision == "float32":
        np.testing.assert_allclose(frozen["logits"], expected, rtol=FLOAT32_RTOL, atol=FLOAT32_ATOL)
    else:
        np.testing.assert_allclose(frozen["logits"], expected, atol=BFLOAT16_ATOL_OF_SCALE * np.abs(expected).max())
    np.testing.assert_allclose(frozen["probabilities"], frozen["official_predictions"], rtol=1e-5, atol=1e-6)
