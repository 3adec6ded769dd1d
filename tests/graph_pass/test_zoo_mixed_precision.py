"""Every network of the zoo under the graph pass: no float32 conv/matmul left in the train step.

The default suite checks one small member of each family, in bfloat16 or float16 by turns, and
trains the smallest ones for a few steps in both; the full matrix (all networks, both precisions)
is marked slow.
"""

import functools

import numpy as np
import pytest
import tensorflow as tf

import slim_mp
from graph_checks import float32_math_ops, reachable_ops
from nets import nets_factory
from precision_matrix import alternating_precision_cases
from reference import load_reference

# Built in the default suite (one small member per family not covered elsewhere; the NASNet
# family takes ~25 s per build, so it is in the slow matrix only). The networks trained below
# get the same train-step checks in their training graphs.
TRAINED = {"lenet": 28, "cifarnet": 32, "resnet_v1_18": 32}  # name -> image size
QUICK = ["mobilenet_v1_025", "mobilenet_v2_035", "mobilenet_v3_small", "mobilenet_edgetpu_075"]
SLOW_ONLY = sorted(set(nets_factory.network_names()) - set(QUICK) - set(TRAINED))
PRECISIONS = ["bfloat16", "float16"]


def _input_shape(name):
    entry = load_reference().get(name)
    return [1] + (entry["input_shape"][1:] if entry else [224, 224, 3])


def _check_network(name, precision):
    """Build ``name``'s mixed-precision train step at its reference input size and check it."""
    graph = tf.Graph()
    with graph.as_default():
        shape = _input_shape(name)
        network_fn = nets_factory.get_network_fn(name, num_classes=10, weight_decay=4e-5, is_training=True)
        logits, _ = network_fn(tf.compat.v1.placeholder(tf.float32, shape))
        tf.compat.v1.losses.sparse_softmax_cross_entropy(tf.zeros([shape[0]], tf.int64),
                                                         tf.reshape(logits, [shape[0], -1]))
        total_loss = tf.compat.v1.losses.get_total_loss()
        optimizer = slim_mp.enable_mixed_precision(tf.compat.v1.train.MomentumOptimizer(0.01, 0.9), precision)
        with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
            train_op = optimizer.minimize(total_loss)
        _assert_low_precision_train_step(name, optimizer, train_op)


def _assert_low_precision_train_step(name, optimizer, train_op):
    """The pass converted ops, left no float32 conv/matmul in the train step, and kept float32 masters."""
    report = optimizer.rewrite_reports[0]
    assert report.ops_converted > 0, report.summary()
    leftover = float32_math_ops(reachable_ops(train_op))
    assert not leftover, f"{name}: float32 math left in the train step: {leftover[:5]}\n{report.summary()}"
    assert {v.dtype.base_dtype for v in tf.compat.v1.model_variables()} == {tf.float32}


# One precision per network, taking turns (both precisions stay in the default suite); the other
# runs with the slow tests.
@pytest.mark.parametrize("name, precision", alternating_precision_cases(QUICK, PRECISIONS))
def test_small_networks_train_step_is_low_precision(name, precision):
    _check_network(name, precision)


@pytest.mark.slow
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("name", SLOW_ONLY)
def test_every_network_train_step_is_low_precision(name, precision):
    _check_network(name, precision)


@functools.lru_cache(maxsize=None)
def _float32_losses(name, steps, size):
    """The float32 reference run, shared by both precisions' comparisons."""
    return _train_losses(name, "float32", steps, size)


def _train_losses(name, precision, steps, size):
    rng = np.random.RandomState(0)
    labels = rng.randint(0, 4, size=8)
    images = (rng.normal(size=(8, size, size, 3)) * 0.2 + (labels[:, None, None, None] - 1.5) * 0.3).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        network_fn = nets_factory.get_network_fn(name, num_classes=4, weight_decay=4e-5, is_training=True)
        logits, _ = network_fn(tf.constant(images))
        tf.compat.v1.losses.sparse_softmax_cross_entropy(tf.constant(labels, tf.int64), logits)
        loss = tf.compat.v1.losses.get_total_loss()
        optimizer = tf.compat.v1.train.MomentumOptimizer(0.002, 0.9)
        if precision != "float32":
            optimizer = slim_mp.enable_mixed_precision(optimizer, precision)
        with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
            train_op = optimizer.minimize(loss)
        if precision != "float32":
            _assert_low_precision_train_step(name, optimizer, train_op)
        with tf.compat.v1.Session() as session:
            session.run([tf.compat.v1.global_variables_initializer(), tf.compat.v1.local_variables_initializer()])
            return [session.run([train_op, loss])[1] for _ in range(steps)]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("name, size", sorted(TRAINED.items()))
def test_small_networks_learn_in_mixed_precision_like_float32(name, size, precision):
    reference = _float32_losses(name, 8, size)
    mixed = _train_losses(name, precision, 8, size)
    assert mixed[-1] < mixed[0]
    assert abs(mixed[-1] - reference[-1]) < 0.2 * reference[0]
