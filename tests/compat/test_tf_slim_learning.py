"""``slim.learning.train`` and ``slim.evaluation.evaluate_once``/``evaluation_loop`` under TF 2.21.

``slim_linear_run.py`` (a subprocess in graph mode) trains a linear least-squares model by plain
gradient descent on one fixed batch and evaluates the checkpoint both ways; NumPy repeats every step.
"""

import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

import script_runs

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "slim_linear_run.py")
STEPS = 25
LEARNING_RATE = 0.1


def _numpy_gradient_descent(inputs: np.ndarray, targets: np.ndarray, steps: int) -> tuple[np.ndarray, float]:
    """Weights and bias after ``steps`` gradient-descent steps on the mean squared error, from zeros."""
    weights, bias = np.zeros(inputs.shape[1]), 0.0
    for _ in range(steps):
        error = inputs @ weights + bias - targets
        weights = weights - LEARNING_RATE * 2 * inputs.T @ error / len(targets)
        bias = bias - LEARNING_RATE * 2 * error.mean()
    return weights, bias


def _mse(inputs: np.ndarray, targets: np.ndarray, weights: np.ndarray, bias: float) -> float:
    return float(np.mean((inputs @ weights + bias - targets) ** 2))


def test_train_then_evaluate_once_and_evaluation_loop_match_numpy(tmp_path):
    rng = np.random.default_rng(6)
    inputs = rng.normal(size=(32, 4)).astype(np.float32)
    targets = (inputs @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.25).astype(np.float32)
    np.savez(tmp_path / "data.npz", inputs=inputs, targets=targets)
    process = script_runs.check_ok(subprocess.run(
        [sys.executable, SCRIPT, f"--data={tmp_path / 'data.npz'}", f"--train_dir={tmp_path / 'train'}",
         f"--eval_dir={tmp_path / 'eval'}", f"--steps={STEPS}", f"--learning_rate={LEARNING_RATE}"],
        capture_output=True, text=True, env=script_runs.script_env(), timeout=script_runs.TIMEOUT_S))
    results = json.loads(process.stdout.strip().splitlines()[-1])

    weights, bias = _numpy_gradient_descent(inputs, targets, STEPS)
    np.testing.assert_allclose(
        results["final_loss"], _mse(inputs, targets, *_numpy_gradient_descent(inputs, targets, STEPS - 1)), rtol=1e-4)
    assert results["checkpoint"].endswith(f"-{STEPS}")
    saved_weights = tf.compat.v1.train.NewCheckpointReader(results["checkpoint"]).get_tensor("linear/weights")
    np.testing.assert_allclose(saved_weights[:, 0], weights, rtol=1e-4, atol=1e-5)
    for key in ("evaluate_once", "evaluation_loop"):
        np.testing.assert_allclose(results[key]["mse"], _mse(inputs, targets, weights, bias), rtol=1e-4)
        np.testing.assert_allclose(results[key]["bias"], bias, rtol=1e-4, atol=1e-6)
