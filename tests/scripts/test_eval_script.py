"""scripts/eval_image_classifier.py: whole-split metrics against an independent float32 computation."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from script_runs import EVAL_SCRIPT, check_ok, evaluated_lenet, run_script, trained_lenet
from slim_mp.datasets.fashion_mnist import load_bundled

tf1 = tf.compat.v1
TEST_IMAGES, TEST_LABELS = load_bundled("test")
ACCURACY_ATOL = 2 / len(TEST_LABELS)  # pixel rounding may flip a near-tie or two
LOSS_RTOL = 1e-3


@pytest.fixture(scope="module")
def lenet_dir():
    return trained_lenet().train_dir


@pytest.fixture(scope="module")
def float32_metrics():
    """The float32 evaluation of ``lenet_dir`` at a batch size (300) that does not divide the 2000 test images."""
    evaluated = evaluated_lenet()
    assert f"accuracy={evaluated.metrics['accuracy']:.4f}" in evaluated.stdout
    return evaluated.metrics


def run_eval(checkpoint_path: str, eval_dir: str, *args: str) -> dict:
    process = check_ok(run_script(
        EVAL_SCRIPT, f"--checkpoint_path={checkpoint_path}", f"--eval_dir={eval_dir}",
        "--dataset_name=fashion_mnist", "--model_name=lenet", *args,
    ))
    with open(os.path.join(eval_dir, "metrics.json"), encoding="utf-8") as handle:
        metrics = json.load(handle)
    assert f"accuracy={metrics['accuracy']:.4f}" in process.stdout
    return metrics


def reference_metrics(train_dir: str) -> tuple:
    """Top-1 and mean loss of the checkpoint over the test split, computed in one float32 batch here."""
    from nets import lenet  # imported late: the package import applies the tf_slim fixes first

    images = TEST_IMAGES[..., np.newaxis].astype(np.float32)  # LeNet reads grayscale data's one channel
    images = (images - 128.0) / 128.0  # LeNet preprocessing: [0, 255] -> [-1, 1)
    with tf.Graph().as_default():
        with slim.arg_scope(lenet.lenet_arg_scope()):
            logits, _ = lenet.lenet(tf.constant(images), num_classes=10, is_training=False)
        with tf1.Session() as session:
            tf1.train.Saver(slim.get_model_variables()).restore(session, tf.train.latest_checkpoint(train_dir))
            values = session.run(logits).astype(np.float64)
    shifted = values - values.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -log_probs[np.arange(len(TEST_LABELS)), TEST_LABELS].mean()
    return float((values.argmax(axis=1) == TEST_LABELS).mean()), float(loss)


def test_every_example_counts_once_and_matches_a_float32_reference(lenet_dir, float32_metrics):
    metrics = float32_metrics
    accuracy, loss = reference_metrics(lenet_dir)
    assert metrics["num_examples"] == len(TEST_LABELS)
    assert metrics["accuracy"] == pytest.approx(accuracy, abs=ACCURACY_ATOL)
    assert metrics["loss"] == pytest.approx(loss, rel=LOSS_RTOL)
    assert metrics["top5"] >= metrics["accuracy"]
    assert metrics["global_step"] == 30
    assert metrics["checkpoint"] == tf.train.latest_checkpoint(lenet_dir)


def test_max_num_batches_limits_the_examples(lenet_dir, tmp_path):
    metrics = run_eval(lenet_dir, str(tmp_path), "--batch_size=300", "--max_num_batches=2")
    assert metrics["num_examples"] == 600


def test_bfloat16_inference_stays_close_to_float32(lenet_dir, float32_metrics, tmp_path):
    """Tolerance: bfloat16 keeps 8 mantissa bits; 1% of the test set may flip, the mean loss moves < 5%."""
    reference = float32_metrics
    mixed = run_eval(lenet_dir, str(tmp_path / "bf16"), "--batch_size=1000", "--precision=bfloat16")
    assert mixed["accuracy"] == pytest.approx(reference["accuracy"], abs=0.01)
    assert mixed["loss"] == pytest.approx(reference["loss"], rel=0.05)


def test_a_folder_without_checkpoint_is_one_error_line(tmp_path):
    process = run_script(
        EVAL_SCRIPT, f"--checkpoint_path={tmp_path}", f"--eval_dir={tmp_path / 'eval'}",
        "--dataset_name=fashion_mnist", "--model_name=lenet",
    )
    assert process.returncode == 2
    assert process.stderr.strip().splitlines()[-1] == (
        f"error: --checkpoint_path={tmp_path} is a folder without a checkpoint; pass a folder or file with one."
    )
    assert "Traceback" not in process.stderr
