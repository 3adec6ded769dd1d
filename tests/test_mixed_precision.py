"""enable_mixed_precision end to end, and the contrib snippet with slim_mp swapped in."""

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

import slim_mp
from graph_checks import float32_math_ops, reachable_ops


def _model(images, labels):
    with slim.arg_scope([slim.conv2d], normalizer_fn=slim.batch_norm,
                        normalizer_params={"is_training": True}):
        net = slim.conv2d(images, 8, [3, 3], scope="conv1")
        net = slim.max_pool2d(net, [2, 2], scope="pool1")
        net = slim.conv2d(net, 16, [3, 3], scope="conv2")
    net = slim.flatten(net)
    logits = slim.fully_connected(net, 4, activation_fn=None, scope="logits")
    tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    return tf.compat.v1.losses.get_total_loss()


def _data():
    rng = np.random.RandomState(0)
    labels = rng.randint(0, 4, size=16)
    images = rng.normal(size=(16, 8, 8, 3)) + labels[:, None, None, None]
    return images.astype(np.float32), labels


def _train(make_train_op, steps=30):
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        images_np, labels_np = _data()
        loss = _model(tf.constant(images_np), tf.constant(labels_np, tf.int64))
        train_op, optimizer = make_train_op(loss)
        with tf.compat.v1.Session() as session:
            session.run([tf.compat.v1.global_variables_initializer(),
                         tf.compat.v1.local_variables_initializer()])
            losses = [session.run([train_op, loss])[1] for _ in range(steps)]
            scaling = session.run((optimizer.loss_scale, optimizer.skipped_steps)) if hasattr(
                optimizer, "loss_scale") else None
    return losses, scaling, train_op, optimizer


def _float32_reference():
    def make(loss):
        optimizer = tf.compat.v1.train.MomentumOptimizer(0.05, 0.9)
        return slim.learning.create_train_op(loss, optimizer), optimizer
    return _train(make)[0]


@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
def test_enable_mixed_precision_trains_like_float32(precision):
    reference = _float32_reference()

    def make(loss):
        optimizer = slim_mp.enable_mixed_precision(
            tf.compat.v1.train.MomentumOptimizer(0.05, 0.9), precision=precision)
        return slim.learning.create_train_op(loss, optimizer), optimizer

    losses, (scale, skipped), train_op, optimizer = _train(make)
    assert not float32_math_ops(reachable_ops(train_op))
    assert len(optimizer.rewrite_reports) == 1
    assert losses[-1] < 0.5 * losses[0]
    assert abs(losses[-1] - reference[-1]) < 0.1 * reference[0]
    if precision == "bfloat16":
        assert (scale, skipped) == (1.0, 0), "bfloat16 needs no loss scaling by default"
    else:
        # Dynamic by default: from 2**15, halved at every skipped (overflowing) step; growing takes 2000 steps.
        assert isinstance(optimizer.loss_scale_manager, slim_mp.ExponentialUpdateLossScaleManager)
        assert skipped < 30 and scale == 2.0 ** 15 * 0.5 ** skipped


def test_contrib_snippet_with_slim_mp_swapped_in():
    """The TF1 contrib recipe, `tf.contrib.mixed_precision` replaced by `slim_mp`, trains in float16."""
    reference = _float32_reference()

    def make(loss):
        slim_mp.rewrite(loss, "float16")
        loss_scale_manager = slim_mp.ExponentialUpdateLossScaleManager(init_loss_scale=2 ** 15,
                                                                       incr_every_n_steps=1000)
        optimizer = tf.compat.v1.train.MomentumOptimizer(0.05, 0.9)
        optimizer = slim_mp.LossScaleOptimizer(optimizer, loss_scale_manager)
        with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
            return optimizer.minimize(loss), optimizer

    losses, scale, train_op, _ = _train(make)
    assert not float32_math_ops(reachable_ops(train_op))
    assert losses[-1] < 0.5 * losses[0]
    assert abs(losses[-1] - reference[-1]) < 0.1 * reference[0]


def test_loss_scale_arguments():
    graph = tf.Graph()
    with graph.as_default():
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
        fixed = slim_mp.enable_mixed_precision(optimizer, "float16", loss_scale=128)
        assert isinstance(fixed.loss_scale_manager, slim_mp.FixedLossScaleManager)
        dynamic = slim_mp.enable_mixed_precision(optimizer, "bfloat16", loss_scale="dynamic")
        assert isinstance(dynamic.loss_scale_manager, slim_mp.ExponentialUpdateLossScaleManager)
        default_bf16 = slim_mp.enable_mixed_precision(optimizer, "bfloat16")
        with tf.compat.v1.Session() as session:
            assert session.run(default_bf16.loss_scale) == 1.0
        with pytest.raises(ValueError, match="loss_scale"):
            slim_mp.enable_mixed_precision(optimizer, "float16", loss_scale="auto")
        with pytest.raises(ValueError, match="precision"):
            slim_mp.enable_mixed_precision(optimizer, "int8")
