"""The graph pass on the networks tf_slim also ships, built from ``nets`` (the official drop-in).

``tf_slim.nets`` holds copies of alexnet, overfeat, vgg, inception v1-v3 and resnet v1/v2; users
build them from the official ``nets`` package, which this repository provides. Checked: low-precision
train steps, float32 masters, fp32-checkpoint restore and numerics against float32.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

import slim_mp
from graph_checks import float32_math_ops, reachable_ops
from nets import alexnet, inception, overfeat, resnet_v1, resnet_v2, vgg
from precision_matrix import alternating_precision_cases

# name -> (network fn, arg scope fn, image size used for build-only checks)
NETS = {
    "alexnet_v2": (alexnet.alexnet_v2, alexnet.alexnet_v2_arg_scope, 224),
    "overfeat": (overfeat.overfeat, overfeat.overfeat_arg_scope, 231),
    "vgg_a": (vgg.vgg_a, vgg.vgg_arg_scope, 224),
    "vgg_16": (vgg.vgg_16, vgg.vgg_arg_scope, 224),
    "inception_v1": (inception.inception_v1, inception.inception_v1_arg_scope, 224),
    "inception_v2": (inception.inception_v2, inception.inception_v2_arg_scope, 224),
    "inception_v3": (inception.inception_v3, inception.inception_v3_arg_scope, 299),
    "resnet_v1_50": (resnet_v1.resnet_v1_50, resnet_v1.resnet_arg_scope, 224),
    "resnet_v1_101": (resnet_v1.resnet_v1_101, resnet_v1.resnet_arg_scope, 224),
    "resnet_v2_50": (resnet_v2.resnet_v2_50, resnet_v2.resnet_arg_scope, 224),
}
PRECISIONS = ["bfloat16", "float16"]
# Checked with the slow tests: resnet_v1_101 is resnet_v1_50 with a deeper block3 (the same ops), and
# its train step is the longest build here; vgg_16 is vgg_a with more layers of the same ops; inception_v3
# is built from the op types of inception_v1 and v2 and is the slowest of the three.
SLOW_NETS = {"resnet_v1_101", "vgg_16", "inception_v3"}


def _build(name, images, labels, num_classes=10, is_training=True):
    network_fn, arg_scope_fn, _ = NETS[name]
    with slim.arg_scope(arg_scope_fn()):
        logits, _ = network_fn(images, num_classes=num_classes, is_training=is_training)
    logits = tf.reshape(logits, [-1, num_classes])
    tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    return logits, tf.compat.v1.losses.get_total_loss()


def _train_op(loss, learning_rate=0.01):
    optimizer = tf.compat.v1.train.MomentumOptimizer(learning_rate, 0.9)
    with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
        return optimizer.minimize(loss)


# Both precisions' tables differ in reductions, logs and reciprocals (``op_classes``), which every
# net here has in its loss and batch norm: one precision per net, taking turns, keeps both precisions
# and every net in the default suite; the other precision runs with the slow tests.
@pytest.mark.parametrize("name, precision", alternating_precision_cases(sorted(NETS), PRECISIONS, SLOW_NETS))
def test_train_step_has_no_float32_math_and_float32_masters(name, precision):
    size = NETS[name][2]
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, size, size, 3])
        labels = tf.compat.v1.placeholder(tf.int64, [1])
        _, loss = _build(name, images, labels)
        before = [(v.name, v.shape.as_list()) for v in tf.compat.v1.global_variables()]
        report = slim_mp.rewrite(loss, precision, device_type="CPU")
        train_op = _train_op(loss)
    assert report.ops_converted > 0 and not report.unlisted_op_types.get("Conv2D")
    assert not float32_math_ops(reachable_ops(train_op))
    with graph.as_default():
        model_vars = [(v.name, v.shape.as_list()) for v in tf.compat.v1.global_variables()][:len(before)]
        assert all(v.dtype.base_dtype == tf.float32 for v in tf.compat.v1.global_variables())
    assert model_vars == before


# resnet_v1_50's numerics are checked at 48 px, where its last block is 2x2: every layer and op
# still runs, at about half of 64 px's work. (At 32 px, a 1x1 last block, six momentum steps
# diverge in float32 itself, so the training comparison would say nothing.)
RESNET_IMAGE_SIZE = 48


def _run_resnet(precision, checkpoint, steps, is_training, seed=0, write_checkpoint=False):
    """Restore ``checkpoint`` into resnet_v1_50 (48 px), run ``steps`` train steps; return weights, logits, losses.

    ``write_checkpoint``: plain fp32 code writes ``checkpoint`` instead, from seeded initial weights
    (the 'pretrained' weights), then trains from them as from a restored copy.
    """
    rng = np.random.RandomState(seed)
    feed_images = rng.rand(4, RESNET_IMAGE_SIZE, RESNET_IMAGE_SIZE, 3).astype(np.float32)
    feed_labels = rng.randint(0, 10, size=[4])
    graph = tf.Graph()
    with graph.as_default():
        if write_checkpoint:
            tf.compat.v1.set_random_seed(1)
        images = tf.compat.v1.placeholder(tf.float32, [4, RESNET_IMAGE_SIZE, RESNET_IMAGE_SIZE, 3])
        labels = tf.compat.v1.placeholder(tf.int64, [4])
        logits, loss = _build("resnet_v1_50", images, labels, is_training=is_training)
        saver = tf.compat.v1.train.Saver()  # the network's variables, not the optimizer's slots
        if precision != "float32":
            logits = slim_mp.rewrite(loss, precision, device_type="CPU").remap(logits)
        train_op = _train_op(loss, learning_rate=0.002) if steps else tf.no_op()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())  # optimizer slots
            if write_checkpoint:
                saver.save(session, checkpoint)
            else:
                saver.restore(session, checkpoint)
            restored = session.run(tf.compat.v1.trainable_variables()[:3])
            feed = {images: feed_images, labels: feed_labels}
            first_logits = session.run(logits, feed)
            losses = [session.run([loss, train_op], feed)[0] for _ in range(steps)]
    return restored, first_logits, losses


@pytest.fixture(scope="module")
def resnet_checkpoint(tmp_path_factory):
    """An fp32 resnet_v1_50 checkpoint written by plain fp32 code, its first weights, and the float32
    forward pass from those weights: the reference both precisions' forward passes are compared with."""
    path = str(tmp_path_factory.mktemp("fp32") / "model.ckpt")
    values, logits, _ = _run_resnet("float32", path, steps=0, is_training=False, write_checkpoint=True)
    return path, values, logits


@pytest.fixture(scope="module")
def float32_losses(resnet_checkpoint):
    """Six float32 training steps from the checkpoint: the reference both precisions' training is compared with."""
    return _run_resnet("float32", resnet_checkpoint[0], steps=6, is_training=True)[2]


@pytest.mark.parametrize("precision, tolerance", [("bfloat16", 0.1), ("float16", 0.02)])
def test_fp32_checkpoint_restores_exactly_and_forward_matches(resnet_checkpoint, precision, tolerance):
    path, saved, reference = resnet_checkpoint
    restored, mixed, _ = _run_resnet(precision, path, steps=0, is_training=False)
    for expected, actual in zip(saved, restored):
        np.testing.assert_array_equal(actual, expected)
    # Max error relative to the largest logit; bfloat16 keeps 8 mantissa bits, float16 11, over 50 layers.
    assert np.abs(mixed - reference).max() / np.abs(reference).max() < tolerance
    assert (np.argmax(mixed, 1) == np.argmax(reference, 1)).mean() >= 0.75


# Training in both precisions against float32 is checked by default on the zoo's resnet_v1_18
# (test_zoo_mixed_precision.py::test_small_networks_learn_in_mixed_precision_like_float32): the same
# nets.resnet_v1 code and op types with basic blocks; on resnet_v1_50's bottlenecks, with the slow tests.
@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bfloat16", "float16"])
def test_a_few_steps_reduce_the_loss_like_float32(resnet_checkpoint, float32_losses, precision):
    path, _, _ = resnet_checkpoint
    reference = float32_losses
    _, _, mixed = _run_resnet(precision, path, steps=6, is_training=True)
    assert mixed[-1] < mixed[0]
    assert abs(mixed[-1] - reference[-1]) < 0.25 * reference[0]
