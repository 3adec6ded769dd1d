"""fp32-vs-low layer diff: float32 against itself is exact, bfloat16 is close, checked against a numpy emulation."""

import json
import os

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from script_runs import REPO_ROOT, check_ok, run_script
from slim_mp.devices import detect_device, precision_support
from slim_mp.numerics.layer_diff import layer_diff
from slim_mp.op_families import ONEDNN_PREFIXES, op_family
from nets import nets_factory

tf1 = tf.compat.v1
COMPARE_SCRIPT = os.path.join(REPO_ROOT, "scripts", "compare_precision.py")
AUDIT_SCRIPT = os.path.join(REPO_ROOT, "scripts", "audit_precision.py")
BFLOAT16_EPSILON = 2.0 ** -8  # bfloat16 keeps 8 significant bits


def _lenet_diff(precision: str):
    images = np.random.default_rng(0).uniform(-1, 1, size=(4, 28, 28, 1)).astype(np.float32)
    with tf.Graph().as_default():
        tf1.set_random_seed(0)
        x = tf1.placeholder(tf.float32, images.shape)
        _, end_points = nets_factory.get_network_fn("lenet", num_classes=10, is_training=False)(x)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            return layer_diff(end_points, precision, session, {x: images})


def test_float32_against_itself_is_exact():
    diff = _lenet_diff("float32")
    assert diff.report is None
    assert [layer.name for layer in diff.layers][:2] == ["conv1", "pool1"]  # network order
    assert all(layer.relative_error == 0.0 and layer.max_abs_error == 0.0 for layer in diff.layers)


def test_bfloat16_is_close_but_not_equal_in_every_layer_down_to_the_logits():
    diff = _lenet_diff("bfloat16")
    assert diff.report is not None and diff.report.ops_converted > 0
    for layer in diff.layers:
        assert layer.nonfinite == 0
        assert 0.1 * BFLOAT16_EPSILON / 2 < layer.relative_error < 8 * BFLOAT16_EPSILON, layer
    assert diff.layers[-1].name == "Predictions"


def _bfloat16_matmul_kernel() -> str:
    """The kernel TensorFlow runs here for a bfloat16 MatMul: oneDNN's (``_MklMatMul``) or Eigen's (``MatMul``)."""
    with tf.Graph().as_default():
        left, right = tf1.placeholder(tf.bfloat16, [2, 3]), tf1.placeholder(tf.bfloat16, [3, 2])
        product = tf.matmul(left, right)
        with tf1.Session() as session:
            metadata = tf1.RunMetadata()
            session.run(product, {left: np.ones([2, 3]), right: np.ones([3, 2])},
                        options=tf1.RunOptions(output_partition_graphs=True), run_metadata=metadata)
    (kernel,) = [node.op for graph in metadata.partition_graphs for node in graph.node
                 if op_family(node.op) == "MatMul"]
    return kernel


@pytest.mark.executed_ops
def test_a_dense_layer_matches_a_numpy_emulation_of_bfloat16():
    rng = np.random.default_rng(1)
    inputs = rng.normal(size=(16, 64)).astype(np.float32)
    with tf.Graph().as_default():
        tf1.set_random_seed(0)
        x = tf1.placeholder(tf.float32, inputs.shape)
        dense = slim.fully_connected(x, 32, activation_fn=None, biases_initializer=None, scope="dense")
        weights = tf1.trainable_variables()[0]
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            w = session.run(weights)
            diff = layer_diff({"dense": dense}, "bfloat16", session, {x: inputs})
    bf16 = ml_dtypes.bfloat16
    reference = inputs.astype(np.float64) @ w.astype(np.float64)
    emulated = (inputs.astype(bf16).astype(np.float32) @ w.astype(bf16).astype(np.float32)).astype(bf16)
    expected = np.linalg.norm(emulated.astype(np.float64) - reference) / np.linalg.norm(reference)
    (layer,) = diff.layers
    # The emulation rounds inputs, weights and the output once and accumulates in float32, as oneDNN's
    # bfloat16 kernels do on a CPU with AVX512-BF16: within 50% there (accumulation order differs,
    # 1.00x over 4 weight seeds on an AMD EPYC). Eigen's kernel (oneDNN off, or no native bfloat16)
    # also rounds partial sums: 1.34-1.64x the emulation over 8 weight seeds on the same EPYC.
    # float32 (no lowering) would give 0, float16 about 8x less than the emulation.
    native = precision_support(detect_device())["bfloat16"].native
    upper = 1.5 if native and _bfloat16_matmul_kernel().startswith(ONEDNN_PREFIXES) else 2.5
    assert 0.5 * expected < layer.relative_error < upper * expected


def test_compare_script_writes_the_table_json_and_png(tmp_path):
    process = check_ok(run_script(
        COMPARE_SCRIPT, "--model_name=lenet", "--dataset_name=fashion_mnist", "--batch_size=4", "--seed=0",
        "--precision=bfloat16", f"--output_dir={tmp_path}", "--num_preprocessing_threads=1",
    ))
    assert "| conv1 |" in process.stdout
    with open(tmp_path / "layer_diff.json", encoding="utf-8") as handle:
        record = json.load(handle)
    assert record["precision"] == "bfloat16" and record["model_name"] == "lenet"
    assert all(0 < layer["relative_error"] < 0.05 for layer in record["layers"])
    assert os.path.getsize(tmp_path / "layer_diff.png") > 1000


def test_audit_script_writes_json_markdown_and_png(tmp_path):
    process = check_ok(run_script(
        AUDIT_SCRIPT, "--model_name=lenet", "--dataset_name=fashion_mnist", "--batch_size=4", "--seed=0",
        "--precision=float16", "--steps=1", f"--output_dir={tmp_path}", "--num_preprocessing_threads=1",
    ))
    assert "loss scale:" in process.stdout
    with open(tmp_path / "audit.json", encoding="utf-8") as handle:
        record = json.load(handle)
    assert record["precision"] == "float16"
    assert {op["name"] for op in record["ops"]} >= {"LeNet/conv1/Conv2D"}
    assert os.path.getsize(tmp_path / "audit.png") > 1000 and os.path.getsize(tmp_path / "audit.md") > 100


@pytest.mark.parametrize("flag, expected", [
    ("--precision=float32", "--precision=float32"),
    ("--steps=0", "--steps=0"),
    ("--model_name=lenett", "--model_name"),
])
def test_audit_bad_input_is_one_error_line(flag, expected, tmp_path):
    process = run_script(AUDIT_SCRIPT, "--model_name=lenet", "--dataset_name=fashion_mnist",
                         f"--output_dir={tmp_path}", flag)
    assert process.returncode == 2
    assert process.stderr.strip().splitlines()[-1].startswith("error:")
    assert expected in process.stderr
