"""tf_slim's thresholded streaming metrics and ``auc_using_histogram`` under TF 2.21, against NumPy.

The thresholded metrics keep their counts in ``slim.local_variable``s (``variable_scope.variable``)
and ``auc_using_histogram`` checks its inputs with ``control_flow_ops.Assert``: without the compat
fixes each raises AttributeError. The data are fed in two batches, so the streaming update is tested.
"""

import numpy as np
import tensorflow as tf
import tf_slim as slim

THRESHOLDS = [0.2, 0.5, 0.8]


def _scores_and_labels(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores in [0, 1) that are informative about their boolean labels."""
    rng = np.random.default_rng(seed)
    labels = rng.random(count) < 0.4
    scores = np.clip(rng.normal(np.where(labels, 0.65, 0.35), 0.2), 0.0, 0.999).astype(np.float32)
    return scores, labels


def _exact_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """ROC AUC as the probability that a positive outscores a negative (ties count one half)."""
    positives, negatives = scores[labels][:, None], scores[~labels][None, :]
    return float(np.mean((positives > negatives) + 0.5 * (positives == negatives)))


def _run_streaming(build, scores: np.ndarray, labels: np.ndarray, batches: int = 2):
    """Build ``(value, update_op) = build(scores, labels)`` on placeholders, update per batch, return value."""
    with tf.Graph().as_default():
        scores_in = tf.compat.v1.placeholder(tf.float32, [None])
        labels_in = tf.compat.v1.placeholder(tf.bool, [None])
        value, update_op = build(scores_in, labels_in)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.local_variables_initializer())
            for batch_scores, batch_labels in zip(np.array_split(scores, batches), np.array_split(labels, batches)):
                session.run(update_op, {scores_in: batch_scores, labels_in: batch_labels})
            return session.run(value)


def test_precision_and_recall_at_thresholds_match_numpy():
    scores, labels = _scores_and_labels(300, seed=3)
    precision = _run_streaming(
        lambda s, truth: slim.metrics.streaming_precision_at_thresholds(s, truth, THRESHOLDS), scores, labels)
    recall = _run_streaming(
        lambda s, truth: slim.metrics.streaming_recall_at_thresholds(s, truth, THRESHOLDS), scores, labels)
    for index, threshold in enumerate(THRESHOLDS):
        predicted = scores > threshold
        true_positives = np.sum(predicted & labels)
        np.testing.assert_allclose(precision[index], true_positives / np.sum(predicted), rtol=1e-5)
        np.testing.assert_allclose(recall[index], true_positives / np.sum(labels), rtol=1e-5)


def test_streaming_auc_matches_the_exact_auc():
    scores, labels = _scores_and_labels(400, seed=4)
    auc = _run_streaming(
        lambda s, truth: slim.metrics.streaming_auc(s, truth, num_thresholds=1000), scores, labels)
    # 1000 thresholds: the trapezoid rule is within 0.005 of the rank AUC on 400 samples.
    assert abs(auc - _exact_auc(scores, labels)) < 0.005


def test_auc_using_histogram_matches_the_exact_auc():
    scores, labels = _scores_and_labels(400, seed=5)
    auc = _run_streaming(
        lambda s, truth: slim.metrics.auc_using_histogram(truth, s, score_range=[0.0, 1.0], nbins=2000), scores, labels)
    # 2000 bins of width 5e-4: only pairs sharing a bin are misordered, well under 0.005 of the pairs.
    assert abs(auc - _exact_auc(scores, labels)) < 0.005
