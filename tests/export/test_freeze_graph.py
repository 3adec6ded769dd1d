"""The official export workflow: our exported GraphDef, then TensorFlow's own ``freeze_graph`` tool.

As the docstring of the official ``export_inference_graph.py`` shows: export the graph without weights,
then ``python -m tensorflow.python.tools.freeze_graph --input_graph=... --input_checkpoint=...
--input_binary=true --output_graph=... --output_node_names=...``. The frozen graph's outputs are
compared with the checkpointed LeNet run here in float32 (resource variables, restored by a Saver).

The official README freezes Inception v3 by its ``Predictions`` end point,
``InceptionV3/Predictions/Reshape_1``; the official LeNet builds that end point outside its scope, as
``Predictions/Reshape_1`` (tests/data/official_tensor_names.json.gz). ``scripts/export_inference_graph.py``
run as a user runs it, then the tool with exactly those names, must freeze a graph that computes the
checkpointed model's predictions.
"""

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from script_runs import REPO_ROOT, check_ok, run_script, trained_lenet
from slim_mp.datasets.fashion_mnist import load_bundled
from slim_mp.export.exporter import export_model
from slim_mp.export.inference_graph import ExportConfig
from slim_mp.training.precision_flags import PrecisionOptions

tf1 = tf.compat.v1
TEST_IMAGES, _ = load_bundled("test")
NUM_IMAGES = 200
FLOAT32_RTOL, FLOAT32_ATOL = 1e-5, 1e-5  # the same float32 computation; only op scheduling may differ
BFLOAT16_ATOL_OF_SCALE = 0.03  # bfloat16 keeps ~3 significant digits
OUTPUT_NODES = "logits,probabilities,Predictions/Reshape_1"  # ours and the official end point's name


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


def freeze_with_tensorflow_tool(graph_path: str, checkpoint: str, output_path: str,
                                output_nodes: str = OUTPUT_NODES) -> None:
    process = subprocess.run(
        [sys.executable, "-m", "tensorflow.python.tools.freeze_graph", f"--input_graph={graph_path}",
         f"--input_checkpoint={checkpoint}", "--input_binary=true", f"--output_graph={output_path}",
         f"--output_node_names={output_nodes}"],
        capture_output=True, text=True, timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]


def read_graph_def(path: str) -> tf1.GraphDef:
    graph_def = tf1.GraphDef()
    with open(path, "rb") as handle:
        graph_def.ParseFromString(handle.read())
    return graph_def


def run_frozen(path: str, images: np.ndarray) -> dict:
    graph_def = read_graph_def(path)
    assert not [node.name for node in graph_def.node if node.op in ("VariableV2", "VarHandleOp")]
    with tf.Graph().as_default() as graph:
        tf1.import_graph_def(graph_def, name="")
        with tf1.Session(graph=graph) as session:
            logits, probabilities, official = session.run(
                ["logits:0", "probabilities:0", "Predictions/Reshape_1:0"], {"input:0": images})
    return {"logits": logits, "probabilities": probabilities, "official_predictions": official}


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_freeze_graph_freezes_the_exported_graph_and_matches_the_checkpoint(precision, tmp_path_factory):
    train_dir = trained_lenet().train_dir
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


EXPORT_SCRIPT = os.path.join(REPO_ROOT, "scripts", "export_inference_graph.py")


@dataclasses.dataclass(frozen=True)
class OfficialFreeze:
    """One official README freeze: the export flags and the node name the README freezes by."""

    model_name: str
    dataset_name: str
    num_classes: int
    image_size: int
    channels: int
    output_node: str


# Inception v3 at 107 px, the smallest size its auxiliary head builds at: the end point names do not
# depend on the size (tests/nets/test_official_tensor_names.py checks them at the official 299 px).
OFFICIAL_FREEZES = {
    "inception_v3": OfficialFreeze("inception_v3", "imagenet", 1001, 107, 3, "InceptionV3/Predictions/Reshape_1"),
    "lenet": OfficialFreeze("lenet", "mnist", 10, 28, 1, "Predictions/Reshape_1"),
}
PREDICTIONS_RTOL, PREDICTIONS_ATOL = 1e-4, 1e-7  # the same float32 graph; only kernel scheduling may differ


def export_with_script(freeze: OfficialFreeze, graph_path: str) -> None:
    check_ok(run_script(EXPORT_SCRIPT, f"--model_name={freeze.model_name}", f"--dataset_name={freeze.dataset_name}",
                        f"--image_size={freeze.image_size}", f"--output_file={graph_path}"))


def write_checkpoint_and_predictions(freeze: OfficialFreeze, checkpoint_prefix: str, images: np.ndarray) -> tuple:
    """Save a seeded float32 ``freeze.model_name`` (the factory's evaluation build) and return its path
    and the predictions it gives ``images``."""
    from nets import nets_factory  # imported late: the package import applies the tf_slim fixes first

    with tf.Graph().as_default():
        tf1.set_random_seed(0)
        network_fn = nets_factory.get_network_fn(freeze.model_name, freeze.num_classes, is_training=False)
        _, end_points = network_fn(tf.constant(images))
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            path = tf1.train.Saver().save(session, checkpoint_prefix)
            return path, session.run(end_points["Predictions"])


@pytest.mark.parametrize("model_name", sorted(OFFICIAL_FREEZES))
def test_the_exported_graph_has_the_official_output_node(model_name, tmp_path):
    freeze = OFFICIAL_FREEZES[model_name]
    graph_path = str(tmp_path / "graph.pb")
    export_with_script(freeze, graph_path)
    assert freeze.output_node in {node.name for node in read_graph_def(graph_path).node}


@pytest.mark.slow
@pytest.mark.parametrize("model_name", sorted(OFFICIAL_FREEZES))
def test_the_official_readme_freeze_by_end_point_name_gives_the_checkpoints_predictions(model_name, tmp_path):
    freeze = OFFICIAL_FREEZES[model_name]
    size = freeze.image_size
    images = np.random.default_rng(0).uniform(-1.0, 1.0, (2, size, size, freeze.channels)).astype(np.float32)
    graph_path, frozen_path = str(tmp_path / "graph.pb"), str(tmp_path / "frozen.pb")
    export_with_script(freeze, graph_path)
    checkpoint, expected = write_checkpoint_and_predictions(freeze, str(tmp_path / "model.ckpt"), images)
    freeze_with_tensorflow_tool(graph_path, checkpoint, frozen_path, output_nodes=freeze.output_node)
    graph_def = read_graph_def(frozen_path)
    assert not [node.name for node in graph_def.node if node.op in ("VariableV2", "VarHandleOp")]
    with tf.Graph().as_default() as graph:
        tf1.import_graph_def(graph_def, name="")
        with tf1.Session(graph=graph) as session:
            predictions = session.run(f"{freeze.output_node}:0", {"input:0": images})
    assert predictions.shape == (2, freeze.num_classes)
    np.testing.assert_allclose(predictions, expected, rtol=PREDICTIONS_RTOL, atol=PREDICTIONS_ATOL)
