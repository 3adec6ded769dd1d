"""Train a linear least-squares model with ``slim.learning.train``, then evaluate it twice; print JSON.

Run by test_tf_slim_learning.py as a subprocess in graph mode (eager execution disabled, as a
TF1-style script under TF 2.21 must: the Supervisor's service threads read the global step outside
any graph context). Inputs come from ``--data`` (an .npz of ``inputs`` and ``targets``); the model
starts from zeros and takes ``--steps`` plain gradient-descent steps on the whole batch, so the test
can repeat them in NumPy. ``clip_gradient_norm`` routes the gradients through slim's
``clip_gradient_norms`` (``ops.IndexedSlices``); its threshold is far above any norm here.
"""

import argparse
import json

import numpy as np
import tensorflow as tf
import tf_slim as slim

import slim_mp  # noqa: F401  (the tf_slim fixes)


def _predictions(inputs: np.ndarray) -> tf.Tensor:
    return slim.fully_connected(tf.constant(inputs), 1, activation_fn=None,
                                weights_initializer=tf.compat.v1.zeros_initializer(), scope="linear")[:, 0]


def train(inputs: np.ndarray, targets: np.ndarray, train_dir: str, steps: int, learning_rate: float) -> float:
    """Return the loss of the last step (computed before its update)."""
    with tf.Graph().as_default():
        tf.compat.v1.train.get_or_create_global_step()
        tf.compat.v1.losses.mean_squared_error(targets, _predictions(inputs))
        train_op = slim.learning.create_train_op(
            tf.compat.v1.losses.get_total_loss(), tf.compat.v1.train.GradientDescentOptimizer(learning_rate),
            clip_gradient_norm=1e6)
        return float(slim.learning.train(train_op, train_dir, number_of_steps=steps, log_every_n_steps=steps))


def _metrics(inputs: np.ndarray, targets: np.ndarray) -> tuple[dict, list]:
    tf.compat.v1.train.get_or_create_global_step()
    predictions = _predictions(inputs)
    values, updates = slim.metrics.aggregate_metric_map({
        "mse": slim.metrics.streaming_mean_squared_error(predictions, targets),
        "bias": slim.metrics.streaming_mean(tf.identity(slim.get_unique_variable("linear/biases"))),
    })
    return values, list(updates.values())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--train_dir", required=True)
    parser.add_argument("--eval_dir", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--learning_rate", type=float, required=True)
    args = parser.parse_args()
    tf.compat.v1.disable_eager_execution()
    data = np.load(args.data)
    inputs, targets = data["inputs"], data["targets"]
    results = {"final_loss": train(inputs, targets, args.train_dir, args.steps, args.learning_rate),
               "checkpoint": tf.train.latest_checkpoint(args.train_dir)}
    with tf.Graph().as_default():
        values, updates = _metrics(inputs, targets)
        results["evaluate_once"] = slim.evaluation.evaluate_once(
            "", results["checkpoint"], f"{args.eval_dir}/once", num_evals=2, eval_op=updates, final_op=values)
    with tf.Graph().as_default():
        values, updates = _metrics(inputs, targets)
        results["evaluation_loop"] = slim.evaluation.evaluation_loop(
            "", args.train_dir, f"{args.eval_dir}/loop", num_evals=1, eval_op=updates, final_op=values,
            eval_interval_secs=0, max_number_of_evaluations=1)
    for key in ("evaluate_once", "evaluation_loop"):
        results[key] = {name: float(value) for name, value in results[key].items()}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
