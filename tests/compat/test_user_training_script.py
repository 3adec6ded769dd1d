"""A user's official-style training script (``official_style_train.py``) trains in bfloat16 and evaluates.

tf_slim's reader over official-format PNG TFRecords, ``slim.learning.create_train_op`` and
``slim.learning.train`` with ``slim_mp.enable_mixed_precision(optimizer, precision="bfloat16")``,
then ``slim.evaluation.evaluate_once``. The reference for the evaluation is a NumPy float32 forward
pass of the saved weights over the same test images.
"""

import json
import os
import subprocess
import sys
from typing import Optional, Sequence

import numpy as np
import pytest
import tensorflow as tf

import script_runs
from slim_mp.datasets import fashion_mnist

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "official_style_train.py")
BATCH_SIZE = 32


def _run(mode: str, *args: str) -> dict:
    process = script_runs.check_ok(subprocess.run(
        [sys.executable, SCRIPT, f"--mode={mode}", f"--batch_size={BATCH_SIZE}", *args],
        capture_output=True, text=True, env=script_runs.script_env(), timeout=script_runs.TIMEOUT_S))
    return json.loads(process.stdout.strip().splitlines()[-1])


def _official_records(directory, write_official_records, train_count: int, test_count: int) -> dict:
    """mnist_train/test.tfrecord from the bundled Fashion-MNIST subset; returns the test arrays too."""
    arrays = {}
    for split, count in (("train", train_count), ("test", test_count)):
        images, labels = fashion_mnist.load_bundled(split)
        images, labels = images[:count, :, :, None], labels[:count]
        write_official_records(str(directory / f"mnist_{split}.tfrecord"), images, labels, "png")
        arrays[split] = (images, labels)
    return arrays


def _numpy_accuracy(checkpoint: str, images: np.ndarray, labels: np.ndarray) -> float:
    """Accuracy of ``official_style_train.small_lenet`` (inference) computed in NumPy from ``checkpoint``."""
    reader = tf.compat.v1.train.NewCheckpointReader(checkpoint)

    def conv_same(x, scope):
        weights, bias = reader.get_tensor(f"{scope}/weights"), reader.get_tensor(f"{scope}/biases")
        size = weights.shape[0]
        padded = np.pad(x, [(0, 0), (size // 2, size // 2), (size // 2, size // 2), (0, 0)])
        out = sum(padded[:, i:i + x.shape[1], j:j + x.shape[2], :] @ weights[i, j]
                  for i in range(size) for j in range(size))
        return np.maximum(out + bias, 0)

    def pool(x):
        n, h, w, c = x.shape
        return x[:, :h // 2 * 2, :w // 2 * 2].reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))

    def dense(x, scope):
        return x @ reader.get_tensor(f"{scope}/weights") + reader.get_tensor(f"{scope}/biases")

    x = (images.astype(np.float32) - 128.0) / 128.0
    x = pool(conv_same(pool(conv_same(x, "conv1")), "conv2"))
    logits = dense(np.maximum(dense(x.reshape(len(x), -1), "fc3"), 0), "fc4")
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def _train_and_evaluate(tmp_path, write_official_records, precision: str, steps: int, train_count: int,
                        test_count: int, seed: Optional[int] = None,
                        extra_flags: Sequence[str] = ()) -> tuple[dict, tuple]:
    data_dir = tmp_path / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    seed_flags = [] if seed is None else [f"--seed={seed}"]
    arrays = _official_records(data_dir, write_official_records, train_count, test_count)
    results = _run("train_and_eval", f"--dataset_dir={data_dir}", f"--train_dir={tmp_path / f'train_{precision}'}",
                   f"--num_samples={train_count}", f"--eval_num_samples={test_count}",
                   f"--max_number_of_steps={steps}", f"--precision={precision}", *seed_flags, *extra_flags)
    return results, arrays["test"]


def test_bfloat16_training_in_the_official_style_then_slim_evaluation(tmp_path, write_official_records):
    steps, test_count = 60, 160  # 160 = 5 eval batches: every test image exactly once
    results, (images, labels) = _train_and_evaluate(
        tmp_path, write_official_records, "bfloat16", steps, train_count=320, test_count=test_count)
    assert results["low_precision_convs"] >= 2 and "bfloat16" in results["rewrite"]
    assert results["checkpoint"].endswith(f"-{steps}")
    expected = _numpy_accuracy(results["checkpoint"], images, labels)
    assert abs(results["accuracy"] - expected) <= 1 / test_count  # float32 summation order may flip one image
    assert results["accuracy"] > 0.4  # ten classes: chance is 0.1


ACCURACY_SEEDS = (0, 1, 2, 3, 4, 5)
ACCURACY_POINTS = 0.015  # the claim: bfloat16 within 1.5 points of float32's accuracy
# The script's default 0.05 (momentum 0.9) still jumps between minima at step 600: float32 alone
# spread 2.3 points (standard deviation over these six seeds), more than the claim can be checked
# against. At 0.01 it spread 0.6 points and reached 81% instead of 78%.
ACCURACY_LEARNING_RATE = 0.01


@pytest.mark.slow
def test_bfloat16_accuracy_stays_within_1_5_points_of_float32(tmp_path, write_official_records):
    """Mean accuracy over a few seeds, each seed's two runs starting from the same weights and data order.

    One run's accuracy moves by a few points from seed to seed in float32 alone, which made a
    single-run comparison flaky. The claim is checked on the means, and only where it can be:
    float32's own seed-to-seed spread, measured here, must leave its mean's standard error well
    inside the 1.5 points, or the test says it needs more seeds.
    """
    accuracies = {"float32": [], "bfloat16": []}
    for seed in ACCURACY_SEEDS:
        for precision in accuracies:
            results, (images, labels) = _train_and_evaluate(
                tmp_path / f"seed_{seed}", write_official_records, precision, steps=600, train_count=4000,
                test_count=1984, seed=seed, extra_flags=[f"--learning_rate={ACCURACY_LEARNING_RATE}"])
            accuracies[precision].append(results["accuracy"])
            assert abs(results["accuracy"] - _numpy_accuracy(results["checkpoint"], images, labels)) <= 2 / 1984
    float32, bfloat16 = (np.array(accuracies[precision]) for precision in ("float32", "bfloat16"))
    standard_error = float32.std(ddof=1) / np.sqrt(len(float32))
    assert standard_error <= ACCURACY_POINTS / 2, \
        f"float32 alone varies too much for {len(float32)} seeds: {accuracies}"
    assert float32.mean() > 0.75, accuracies
    assert abs(bfloat16.mean() - float32.mean()) <= ACCURACY_POINTS, accuracies
