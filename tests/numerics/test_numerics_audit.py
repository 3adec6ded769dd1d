"""Value-range audit: small models with known float16 problems, checked against numpy on the float32 values."""

import json
import math

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

import slim_mp
from slim_mp.numerics.limits import HISTOGRAM_BINS, LOG2_LOW, type_limits
from slim_mp.numerics.audit_advice import op_scope, scale_range
from slim_mp.numerics.value_audit import audit_markdown

tf1 = tf.compat.v1
BATCH, FEATURES, CLASSES = 16, 32, 10
FP16_MAX = 65504.0
FP16_TINY = 2.0 ** -24


def _batch(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(BATCH, FEATURES)).astype(np.float32) * 2, rng.integers(0, CLASSES, BATCH)


def _overflow_model(x, labels):
    """hidden -> "big" (activations beyond 65504) -> "shrink" (back to small values) -> logits.

    The two fixed projections (not trained) stand for un-normalized features: float32 trains this fine.
    """
    hidden = slim.fully_connected(x, 64, scope="hidden")
    big = slim.fully_connected(hidden, 64, weights_initializer=tf1.constant_initializer(3000.0),
                               activation_fn=None, trainable=False, scope="big")
    small = slim.fully_connected(big, 16, weights_initializer=tf1.truncated_normal_initializer(stddev=1e-5),
                                 trainable=False, scope="shrink")
    logits = slim.fully_connected(small, CLASSES, activation_fn=None, scope="logits")
    return tf1.losses.sparse_softmax_cross_entropy(labels, logits), big


def _tiny_gradient_model(x, labels):
    """An ordinary MLP whose loss carries a weight of 1e-10: every activation gradient is far below 2**-24."""
    hidden = slim.fully_connected(x, 64, scope="hidden")
    logits = slim.fully_connected(hidden, CLASSES, activation_fn=None, scope="logits")
    return 1e-10 * tf1.losses.sparse_softmax_cross_entropy(labels, logits), logits


def _audit(model, precision, steps=2):
    """Audit ``model`` in float32; return (result, (float32 values of the model's probe tensor, its gradient,
    the values of every audited gradient))."""
    images, labels = _batch()
    with tf.Graph().as_default():
        tf1.set_random_seed(0)
        x, y = tf1.placeholder(tf.float32, [BATCH, FEATURES]), tf1.placeholder(tf.int64, [BATCH])
        loss, probe = model(x, y)
        probe_gradient = tf.gradients(loss, probe)[0]
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            feed = {x: images, y: labels}
            probe_values = session.run([probe, probe_gradient], feed)
            result = slim_mp.audit(loss, precision, session, feed, steps=steps)
            audited = [tf1.get_default_graph().get_operation_by_name(op.name).outputs[0]
                       for op in result.ops_of("gradient")]
            gradients = session.run(tf.gradients(loss, audited), feed)
    return result, probe_values + [gradients]


def _train(model, precision, steps, learning_rate, **options):
    """Train ``model`` with slim_mp from the audit's initial weights; return (losses, skipped steps)."""
    images, labels = _batch()
    with tf.Graph().as_default():
        tf1.set_random_seed(0)
        x, y = tf1.placeholder(tf.float32, [BATCH, FEATURES]), tf1.placeholder(tf.int64, [BATCH])
        loss, _ = model(x, y)
        optimizer = slim_mp.enable_mixed_precision(tf1.train.GradientDescentOptimizer(learning_rate), precision,
                                                   **options)
        train_op = optimizer.minimize(loss)
        with tf1.Session() as session:
            session.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            losses = [float(session.run([train_op, loss], {x: images, y: labels})[1]) for _ in range(steps)]
            return losses, int(session.run(optimizer.skipped_steps))


def _row(result, name, kind):
    (row,) = [op for op in result.ops if op.name == name and op.kind == kind]
    return row


def test_an_overflowing_layer_is_measured_and_its_scope_recommended():
    result, (big_values, _, _) = _audit(_overflow_model, "float16")
    row = _row(result, "big/BiasAdd", "activation")
    magnitude = np.abs(big_values)
    assert row.max_abs == pytest.approx(magnitude.max(), rel=1e-6)
    assert row.frac_overflow == pytest.approx(np.mean(magnitude > FP16_MAX), abs=1e-9)
    assert row.frac_overflow > 0.1
    assert row.min_nonzero_abs == pytest.approx(magnitude[magnitude > 0].min(), rel=1e-6)
    keep = result.recommendation.keep_fp32_scopes
    assert "big" in keep
    assert "hidden" not in keep and "logits" not in keep
    assert _row(result, "hidden/MatMul", "activation").frac_overflow == 0.0


def test_following_the_scope_recommendation_makes_float16_train():
    result, _ = _audit(_overflow_model, "float16")
    keep = list(result.recommendation.keep_fp32_scopes)
    losses, skipped = _train(_overflow_model, "float16", 5, 0.1, loss_scale=1.0)
    assert skipped == 5  # as is, every float16 step overflows
    losses, skipped = _train(_overflow_model, "float16", 5, 0.1, loss_scale=1.0, keep_fp32_scopes=keep)
    assert skipped == 0
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]


def test_tiny_gradients_get_a_scale_range_that_lifts_them_and_keeps_the_largest_finite():
    result, (_, logits_gradient, all_gradients) = _audit(_tiny_gradient_model, "float16")
    row = _row(result, "logits/MatMul", "gradient")
    magnitude = np.abs(logits_gradient)
    assert row.max_abs == pytest.approx(magnitude.max(), rel=1e-6)
    assert row.frac_underflow == pytest.approx(np.mean((magnitude > 0) & (magnitude < FP16_TINY)), abs=1e-9)
    assert row.frac_underflow > 0.9
    lo, hi = result.recommendation.loss_scale_range
    largest = max(op.max_abs for op in result.ops_of("gradient"))
    assert hi * largest <= FP16_MAX < 2 * hi * largest  # the largest power of two that keeps it finite
    # lo: the smallest power of two leaving <= 1% of the non-zero gradients flushed (numpy, all audited gradients)
    every = np.abs(np.concatenate([g.ravel() for g in all_gradients]))
    flushed = lambda scale: np.sum((every > 0) & (every * scale < FP16_TINY))  # noqa: E731
    assert flushed(lo) <= 0.01 * np.sum(every > 0) < flushed(lo / 2)
    assert lo <= result.recommendation.initial_loss_scale <= hi


def test_following_the_loss_scale_recommendation_trains_where_scale_1_does_not():
    result, _ = _audit(_tiny_gradient_model, "float16")
    scale = result.recommendation.initial_loss_scale
    learning_rate = 1e9  # compensates the loss weight of 1e-10
    reference, _ = _train(_tiny_gradient_model, "bfloat16", 5, learning_rate)  # float32's range: no flushing
    unscaled, _ = _train(_tiny_gradient_model, "float16", 5, learning_rate, loss_scale=1.0)
    scaled, skipped = _train(_tiny_gradient_model, "float16", 5, learning_rate, loss_scale=scale)
    assert reference[-1] < 0.5 * reference[0]
    assert unscaled[-1] > 0.9 * unscaled[0]  # most gradients flushed to zero: it barely learns
    assert skipped == 0
    assert scaled[-1] == pytest.approx(reference[-1], rel=0.05)


def test_bfloat16_limits_see_neither_problem():
    result, _ = _audit(_overflow_model, "bfloat16", steps=1)
    assert result.recommendation.keep_fp32_scopes == ()
    result, _ = _audit(_tiny_gradient_model, "bfloat16", steps=1)
    assert result.recommendation.initial_loss_scale is None  # nothing flushes: no scaling needed
    assert all(op.frac_underflow == 0 and op.frac_overflow == 0 for op in result.ops)


def test_json_layout_and_markdown():
    result, _ = _audit(_overflow_model, "float16", steps=1)
    data = json.loads(json.dumps(result.to_dict()))
    assert set(data) == {"precision", "ops", "recommendation"}
    assert data["precision"] == "float16"
    assert set(data["ops"][0]) == {"name", "type", "kind", "max_abs", "min_nonzero_abs", "frac_overflow",
                                   "frac_underflow"}
    assert {op["kind"] for op in data["ops"]} == {"activation", "gradient"}
    assert set(data["recommendation"]) == {"keep_fp32_scopes", "initial_loss_scale", "loss_scale_range"}
    assert "big" in audit_markdown(result)


def test_histograms_put_each_element_in_its_power_of_two_bin():
    values = np.array([[0.0, 1.5, 2.0 ** -30, 3e5, 2.0 ** -24, 2.0 ** -24 * 0.75]], np.float32)
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, values.shape)
        copy = tf.matmul(x, tf.eye(values.shape[1]))  # the one op float16 would lower: its output is x
        with tf1.Session() as session:
            result = slim_mp.audit(tf.reduce_sum(copy), "float16", session, {x: values}, steps=1)
    expected = np.zeros(HISTOGRAM_BINS, np.int64)
    expected[0] = 1  # the zero
    for exponent in (0, -30, 18, -24, -25):  # floor(log2 |x|)
        expected[exponent - LOG2_LOW] += 1
    np.testing.assert_array_equal(result.activation_histogram, expected)
    (row,) = result.ops_of("activation")
    assert row.frac_overflow == pytest.approx(1 / 6)
    assert row.frac_underflow == pytest.approx(2 / 6)  # 2**-30 and 0.75 * 2**-24; 2**-24 itself is representable


def test_scale_range_on_a_known_histogram():
    limits = type_limits("float16")
    histogram = np.zeros(HISTOGRAM_BINS, np.int64)
    histogram[-30 - LOG2_LOW] = 1000  # 1000 gradients in [2**-30, 2**-29)
    initial, (lo, hi) = scale_range(histogram, 2.0 ** -29, limits)
    assert lo == 2.0 ** 6  # [2**-24, 2**-23): the smallest subnormal and up
    assert hi == 2.0 ** 44  # 2**-29 * 2**45 = 2**16 > 65504
    assert initial == 2.0 ** 25


def test_op_scope_and_bad_steps():
    assert op_scope("net/fc1/MatMul") == "net/fc1"
    assert op_scope("MatMul") == "MatMul"
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, [2, 3])
        loss = tf.reduce_sum(slim.fully_connected(x, 2))
        with pytest.raises(ValueError, match="steps=0"):
            slim_mp.audit(loss, "float16", tf1.Session(), steps=0)


def test_batch_norm_statistics_stay_float32_and_are_not_flagged():
    # Conv outputs of a few hundred: their batch variance (> 65504) is a float32 output of the rewritten
    # FusedBatchNormV3, so only the normalized output counts against float16.
    images = np.random.default_rng(0).normal(size=(4, 8, 8, 3)).astype(np.float32)
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, images.shape)
        net = slim.conv2d(x, 8, [3, 3], weights_initializer=tf1.constant_initializer(60.0),
                          normalizer_fn=slim.batch_norm, normalizer_params={"is_training": True}, scope="conv")
        loss = tf.reduce_mean(slim.conv2d(net, 4, [1, 1], scope="head"))  # keeps the batch norm between low ops
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            variance = session.run(tf.math.reduce_variance(
                tf1.get_default_graph().get_tensor_by_name("conv/Conv2D:0"), axis=[0, 1, 2]), {x: images})
            result = slim_mp.audit(loss, "float16", session, {x: images}, steps=1)
    assert variance.max() > FP16_MAX
    assert result.recommendation.keep_fp32_scopes == ()
    assert _row(result, "conv/BatchNorm/FusedBatchNormV3", "activation").max_abs < 10


@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
def test_the_audit_lowers_what_the_static_painting_would_whatever_the_placement(precision, tmp_path):
    # The measured placement may keep every conv float32 on this device; the audit must still see them.
    from slim_mp.graph_pass.placement import PlacementFiles, PlacementMeasuring, PlacementOptions

    def refuse(*args):
        raise AssertionError("the audit timed ops: it must not depend on the placement")

    with tf.Graph().as_default():
        images = tf1.placeholder(tf.float32, [2, 8, 8, 3])
        net = slim.conv2d(images, 4, [3, 3], scope="conv")
        loss = tf.reduce_mean(tf.square(net))
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            feed = {images: np.ones([2, 8, 8, 3], np.float32)}
            result = slim_mp.audit(loss, precision, session, feed, steps=1, placement="measured",
                                   placement_options=PlacementOptions(
                                       PlacementFiles(cache_dir=str(tmp_path)),
                                       PlacementMeasuring(measure=refuse, measure_steps=refuse)))
    assert "conv/Conv2D" in {op.name for op in result.ops_of("activation")}
