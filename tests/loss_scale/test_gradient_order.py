"""Weight-decay terms wait for the gradient they are added to: same gradients, computed later.

Differential: the gradients of ``LossScaleOptimizer`` (which defers the terms) are compared with the
wrapped optimizer's own ``compute_gradients`` of the same loss in the same graph and session (the
unchanged computation). Deferring only adds control dependencies, and 128 is a power of two, so the
tolerance is zero.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

import slim_mp
from graph_checks import traced_op_times
from slim_mp.loss_scale.gradient_order import defer_variable_terms
from slim_mp.loss_scale.managers import FixedLossScaleManager, NoLossScaling
from slim_mp.loss_scale.optimizer import LossScaleOptimizer

tf1 = tf.compat.v1
BATCH, SIZE, CLASSES, DECAY = 2, 8, 3, 0.01
REGULARIZED = 3  # two conv kernels and the logits' weights; biases are not regularized


def _regularized_loss(precision=None):
    """Total loss (cross-entropy + L2 weight decay) of a two-conv net, rewritten to ``precision`` if given."""
    rng = np.random.RandomState(0)
    images = tf.constant(rng.uniform(-1, 1, (BATCH, SIZE, SIZE, 3)).astype(np.float32))
    labels = tf.constant(rng.randint(0, CLASSES, BATCH).astype(np.int64))
    with slim.arg_scope([slim.conv2d, slim.fully_connected], weights_regularizer=slim.l2_regularizer(DECAY)):
        net = slim.conv2d(images, 4, 3, scope="conv1")
        net = slim.conv2d(net, 4, 3, scope="conv2")
        logits = slim.fully_connected(slim.flatten(net), CLASSES, activation_fn=None, scope="logits")
    tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    loss = tf1.losses.get_total_loss()
    if precision is not None:
        loss = slim_mp.rewrite(loss, precision, placement="static").remap(loss)
    return loss


def _decay_terms(graph):
    return [op for op in graph.get_operations() if op.name.endswith("L2Loss_grad/mul")]


@pytest.mark.parametrize("make_manager", [NoLossScaling, lambda: FixedLossScaleManager(128.0)],
                         ids=["no_scaling", "scale_128"])
@pytest.mark.parametrize("precision", [None, "bfloat16"], ids=["float32", "bfloat16"])
def test_gradients_equal_the_wrapped_optimizers_own(make_manager, precision):
    with tf.Graph().as_default() as graph:
        tf1.set_random_seed(0)
        loss = _regularized_loss(precision)
        inner = tf1.train.GradientDescentOptimizer(0.1)
        reference = inner.compute_gradients(loss)
        deferred = LossScaleOptimizer(inner, make_manager(), max_consecutive_skips_at_min=None).compute_gradients(loss)
        waiting = [op for op in _decay_terms(graph) if op.control_inputs]
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            expected, actual = session.run(([g for g, _ in reference], [g for g, _ in deferred]))
    assert len(waiting) == REGULARIZED  # the terms of the wrapped gradients only
    assert [v.op.name for _, v in reference] == [v.op.name for _, v in deferred]
    for (_, variable), want, got in zip(reference, expected, actual):
        np.testing.assert_allclose(got, want, rtol=0, atol=0, err_msg=variable.op.name)


@pytest.mark.executed_ops
def test_each_term_runs_after_the_term_it_is_added_to():
    # What holds in every scheduling order: a deferred term starts only after the ops making the
    # other inputs of its sum have ended.
    with tf.Graph().as_default() as graph:
        loss = _regularized_loss()
        optimizer = LossScaleOptimizer(tf1.train.GradientDescentOptimizer(0.1), NoLossScaling())
        train_op = optimizer.minimize(loss)
        after = {op.name: op.control_inputs for op in _decay_terms(graph)}
    times = traced_op_times(train_op)
    assert len(after) == REGULARIZED and all(after.values())
    for term, others in after.items():
        for other in others:
            while other.name not in times:  # grappler removes identities: their input ran instead
                other = other.inputs[0].op
            assert times[term][0] >= times[other.name][1], (term, other.name)


def test_a_term_with_another_reader_or_without_a_later_term_is_left_alone():
    with tf.Graph().as_default():
        weight = tf1.get_variable("w", [4, 4])
        activation = tf1.placeholder(tf.float32, [2, 4])  # an input, as a real step reads
        decay = tf.nn.l2_loss(weight)
        loss = tf.reduce_sum(tf.matmul(activation, weight)) + decay
        (gradient,) = tf.gradients(loss, [weight])
        (term,) = [op for op in tf1.get_default_graph().get_operations() if op.name.endswith("L2Loss_grad/mul")]
        tf.identity(term.outputs[0])  # a second reader: deferring would hold it for that one too
        assert defer_variable_terms([gradient]) == 0
        (only_decay,) = tf.gradients(tf.nn.l2_loss(weight) * 2.0, [weight])
        assert defer_variable_terms([only_decay, None]) == 0
        assert not term.control_inputs
