"""Whole-step timing of placement candidates: the standalone copy of a region is faithful and complete.

Nothing here depends on this machine's speed: the tests check what the copies compute and contain.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from slim_mp.graph_pass.placement import whole_steps
from slim_mp.graph_pass.placement import Candidate
from slim_mp.graph_pass.placement.whole_steps import build_candidate_step, copy_region
from slim_mp.graph_pass.op_classes import default_classes
from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.region import select_region

tf1 = tf.compat.v1
CONFIG = PaintConfig(tf.bfloat16, default_classes(tf.bfloat16), [], "CPU")


def _small_net(dropout=True):
    """conv + batch norm (with its update ops) + dropout + fc + cross-entropy; returns (graph, loss, feeds)."""
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(0)
        images = tf1.placeholder(tf.float32, [4, 8, 8, 3], name="images")
        labels = tf1.placeholder(tf.int64, [4], name="labels")
        net = slim.conv2d(images, 6, [3, 3], normalizer_fn=slim.batch_norm,
                          normalizer_params={"is_training": True}, scope="conv")
        net = slim.flatten(net)
        if dropout:
            net = slim.dropout(net, 0.5, is_training=True)
        logits = slim.fully_connected(net, 5, activation_fn=None, scope="logits")
        loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    rng = np.random.RandomState(0)
    feeds = {images: rng.uniform(-1, 1, [4, 8, 8, 3]).astype(np.float32), labels: np.array([0, 1, 2, 3])}
    return graph, loss, feeds


def _copy(graph, loss):
    with graph.as_default():
        region = select_region([loss, tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)])
        return copy_region(region, [loss])


def _allow_names(copy):
    return frozenset(node.name for node in copy.graph_def.node if node.op in ("Conv2D", "MatMul"))


def test_copy_replaces_inputs_and_variable_reads_and_marks_the_trainable_ones():
    graph, loss, _ = _small_net()
    ops_before = len(graph.get_operations())
    copy = _copy(graph, loss)
    assert len(graph.get_operations()) == ops_before, "copying must not touch the user's graph"
    by_source = {s.tensor_name.split(":")[0]: s for s in copy.substitutes}
    assert by_source["images"].shape == (4, 8, 8, 3) and not by_source["images"].trainable
    assert by_source["labels"].dtype == tf.int64
    trainable = {s.tensor_name for s in copy.substitutes if s.trainable}
    with graph.as_default():
        names = {v.op.name for v in tf1.trainable_variables()}
    read_variables = {graph.get_tensor_by_name(name).op.inputs[0].op.name for name in trainable}
    assert read_variables == names and len(names) == 4  # conv weights, batch-norm beta, fc weights and biases
    reads = [graph.get_tensor_by_name(s.tensor_name).op for s in copy.substitutes]
    moving = [s for s, read in zip(copy.substitutes, reads) if read.inputs and "moving_" in read.inputs[0].op.name]
    assert moving and not any(s.trainable for s in moving), "batch-norm statistics are read, never trained"
    assert not any(node.op.startswith("Assign") for node in copy.graph_def.node), "variable updates stay out"
    assert any(node.op == "RandomUniform" for node in copy.graph_def.node), "dropout's random numbers stay in"


def test_float32_copy_computes_the_same_loss_as_the_original():
    graph, loss, feeds = _small_net(dropout=False)
    copy = _copy(graph, loss)
    with tf1.Session(graph=graph) as session:
        session.run(tf1.global_variables_initializer())
        expected = session.run(loss, feeds)
        values = {s.tensor_name: session.run(graph.get_tensor_by_name(s.tensor_name), feeds) for s in copy.substitutes}
    step = build_candidate_step(copy, CONFIG, Candidate(_allow_names(copy)))
    try:
        with step.session.graph.as_default():
            for name, variable in step.substitutes.items():
                variable.load(values[name], step.session)
        computed = step.session.run(step.target)[0]
    finally:
        step.session.close()
    np.testing.assert_allclose(computed, expected, rtol=1e-6)


def test_low_candidate_computes_weight_gradients_in_low_precision_and_updates_every_weight():
    # The gradients must reach the trainable substitutes through the low-precision ops (a painted
    # Identity between the variable and its cast once cut them off and the step timed no backward pass).
    graph, loss, _ = _small_net()
    copy = _copy(graph, loss)
    low = build_candidate_step(copy, CONFIG, Candidate(frozenset()))
    low_graph = low.session.graph
    low.session.close()
    filter_gradients = [op for op in low_graph.get_operations() if op.type == "Conv2DBackpropFilter"]
    assert [op.get_attr("T") for op in filter_gradients] == [tf.bfloat16]
    updates = [op for op in low_graph.get_operations() if op.type == "ResourceApplyMomentum"]
    assert len(updates) == sum(s.trainable for s in copy.substitutes)


def test_float32_candidate_has_no_low_precision_op():
    graph, loss, _ = _small_net()
    copy = _copy(graph, loss)
    step = build_candidate_step(copy, CONFIG, Candidate(_allow_names(copy)))
    step.session.close()
    assert not [op for op in step.session.graph.get_operations() if op.name.endswith("_bf16")]


def test_time_candidate_steps_returns_one_time_per_candidate():
    graph, loss, _ = _small_net()
    copy = _copy(graph, loss)
    times = whole_steps.time_candidate_steps(
        copy, CONFIG, [Candidate(frozenset()), Candidate(_allow_names(copy)),
                       Candidate(frozenset(), tail_low=True)], warmup=1, runs=3)
    assert len(times) == 3 and all(t is not None and t.ms > 0 and t.noise >= 0 for t in times)
    assert times[0].noise == 0.0, "the reference step has no noise against itself"


def test_copy_digest_is_stable_and_tells_graphs_apart():
    first, second, other = _small_net(), _small_net(), _small_net(dropout=False)
    assert _copy(*first[:2]).digest() == _copy(*second[:2]).digest()
    assert _copy(*first[:2]).digest() != _copy(*other[:2]).digest()


def test_region_inside_a_while_loop_cannot_be_copied():
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.placeholder(tf.float32, [2, 4])
        _, result = tf.while_loop(lambda i, x: i < 2, lambda i, x: (i + 1, tf.matmul(x, tf.ones([4, 4]))),
                                  [0, images])
        loss = tf.reduce_mean(result)
        region = select_region(loss)
    with pytest.raises(ValueError, match="inside control flow or a function"):
        copy_region(region, [loss])


def test_input_without_a_static_shape_cannot_be_copied():
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.placeholder(tf.float32, [None, 4], name="images")
        loss = tf.reduce_mean(tf.matmul(images, tf.ones([4, 4])))
        region = select_region(loss)
    with pytest.raises(ValueError, match="images:0 has no static shape"):
        copy_region(region, [loss])


def test_an_inference_target_times_the_forward_step_only():
    from slim_mp.graph_pass.placement import MeasuringTarget

    graph, loss, _ = _small_net(dropout=False)
    copy = _copy(graph, loss)
    for training, expect_updates in ((True, True), (False, False)):
        step = build_candidate_step(copy, CONFIG, Candidate(frozenset()), MeasuringTarget(training=training))
        types = {op.type for op in step.session.graph.get_operations()}
        step.session.close()
        assert ("ResourceApplyMomentum" in types) is expect_updates
        assert any(t.endswith("Grad") or "Backprop" in t for t in types) is expect_updates
