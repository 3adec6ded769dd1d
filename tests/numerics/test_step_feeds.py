"""``feeds`` of ``slim_mp.audit`` and ``slim_mp.layer_diff``: one dict, one per step, a function, or None.

A sequence of feed dicts runs one batch each; the results are checked against the float32 values
of those batches computed here, and against single-batch runs.
"""

import math

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

import slim_mp
from slim_mp.numerics.step_feeds import step_feeds

tf1 = tf.compat.v1
BATCH, FEATURES = 8, 16


def _batches(count: int):
    rng = np.random.default_rng(3)
    return [rng.normal(size=(BATCH, FEATURES)).astype(np.float32) * (index + 1) for index in range(count)]


def _dense_net(x):
    hidden = slim.fully_connected(x, 32, scope="hidden")
    logits = slim.fully_connected(hidden, 4, activation_fn=None, scope="logits")
    return {"hidden": hidden, "logits": logits}


def test_audit_with_one_feed_dict_per_step_sees_every_batch():
    batches = _batches(3)
    with tf.Graph().as_default():
        tf1.set_random_seed(0)
        x = tf1.placeholder(tf.float32, [BATCH, FEATURES])
        end_points = _dense_net(x)
        loss = tf.reduce_mean(tf.square(end_points["logits"]))
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            matmul = tf1.get_default_graph().get_tensor_by_name("hidden/MatMul:0")
            float32_values = [session.run(matmul, {x: batch}) for batch in batches]
            result = slim_mp.audit(loss, "float16", session, feeds=[{x: batch} for batch in batches])
    assert result.steps == 3  # one step per feed dict when steps is not given
    (row,) = [op for op in result.ops if op.name == "hidden/MatMul" and op.kind == "activation"]
    assert row.max_abs == pytest.approx(max(np.abs(v).max() for v in float32_values), rel=1e-6)
    # the largest batch (the last, scaled x3) sets the maximum: a run of only the first would be ~3x smaller
    assert row.max_abs > 2 * np.abs(float32_values[0]).max()


def _layer_diff(batches, weights_seed=0, **keywords):
    with tf.Graph().as_default():
        tf1.set_random_seed(weights_seed)
        x = tf1.placeholder(tf.float32, [BATCH, FEATURES])
        end_points = _dense_net(x)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            reference = [session.run(end_points, {x: batch}) for batch in batches]
            diff = slim_mp.layer_diff(end_points, "bfloat16", session, [{x: batch} for batch in batches], **keywords)
    return diff, reference


def test_layer_diff_over_several_batches_combines_the_single_batch_errors():
    batches = _batches(2)
    combined, reference = _layer_diff(batches)
    singles = [_layer_diff([batch])[0] for batch in batches]
    for index, layer in enumerate(combined.layers):
        parts = [single.layers[index] for single in singles]
        norms = [float(np.linalg.norm(np.asarray(run[layer.name], np.float64))) for run in reference]
        expected = math.sqrt(sum((part.relative_error * norm) ** 2 for part, norm in zip(parts, norms))
                             / sum(norm ** 2 for norm in norms))
        assert layer.shape == (BATCH, 32 if layer.name == "hidden" else 4)
        assert layer.max_abs_error == max(part.max_abs_error for part in parts)
        assert layer.relative_error == pytest.approx(expected, rel=1e-9)
        assert layer.relative_error > 0  # bfloat16 does round


@pytest.mark.parametrize("feeds", [42, "images", [{"x:0": 1}, 7], ({"x:0": 1}, ["not a dict"])])
def test_anything_else_is_a_type_error_naming_feeds(feeds):
    with pytest.raises(TypeError, match=r"feeds(\[\d\])? must be"):
        step_feeds(feeds, None, default_steps=5)


def test_audit_and_layer_diff_refuse_a_bad_feeds_before_running_anything():
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, [BATCH, FEATURES])
        end_points = _dense_net(x)
        loss = tf.reduce_mean(end_points["logits"])
        with pytest.raises(TypeError, match="feeds must be"):
            slim_mp.audit(loss, "float16", None, feeds=3)
        with pytest.raises(TypeError, match=r"feeds\[1\] must be a feed dict"):
            slim_mp.layer_diff(end_points, "bfloat16", None, [{x: _batches(1)[0]}, None])


def test_steps_must_match_a_sequence_of_feed_dicts():
    with pytest.raises(ValueError, match="steps=5 but feeds holds 2 feed dicts"):
        step_feeds([{}, {}], 5, default_steps=5)
    with pytest.raises(ValueError, match="empty sequence"):
        step_feeds([], None, default_steps=5)
    assert step_feeds([{}, {}], 2, default_steps=5).steps == 2


def test_one_dict_a_function_and_none_keep_their_meaning():
    feed = {"x:0": 1.0}
    single = step_feeds(feed, None, default_steps=5)
    assert single.steps == 5 and all(single.feed(step) is feed for step in range(5))
    by_step = step_feeds(lambda step: {"x:0": step}, 3, default_steps=5)
    assert [by_step.feed(step) for step in range(3)] == [{"x:0": 0}, {"x:0": 1}, {"x:0": 2}]
    assert step_feeds(None, None, default_steps=1).feed(0) is None
    with pytest.raises(ValueError, match="steps=0 must be a positive integer"):
        step_feeds(None, 0, default_steps=5)
