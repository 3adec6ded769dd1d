"""``batch_norm_decay``: the factory's keyword and training's ``--batch_norm_decay``, which replace a network's own.

The oracle is batch norm's update rule: from the initial moving mean 0, one training step leaves
``(1 - decay) * the batch mean`` of the layer's input.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from nets import nets_factory
from script_runs import REPO_ROOT, check_bad_input, run_script

TRAIN_SCRIPT = os.path.join(REPO_ROOT, "scripts", "train_image_classifier.py")


@pytest.mark.parametrize("model_name, first_layer", [
    ("mobilenet_v1", "MobilenetV1/Conv2d_0"),  # batch norm's own arg scope entry
    ("inception_v1", "InceptionV1/Conv2d_1a_7x7"),  # conv2d's normalizer_params, the Inception way
])
def test_the_factory_sets_the_decay_the_moving_averages_use(model_name, first_layer):
    # One update from the initial moving mean 0: moving_mean = (1 - decay) * the batch mean of the layer's input.
    decay = 0.75
    network_scope = first_layer.split("/")[0]
    with tf.Graph().as_default():
        images = tf.random.stateless_uniform([2, 32, 32, 3], seed=[1, 2])
        network_fn = nets_factory.get_network_fn(model_name, 10, is_training=True, batch_norm_decay=decay)
        network_fn(images, global_pool=True)  # global pooling: 32 px is below the 7x7 heads
        graph = tf.compat.v1.get_default_graph()
        convolution = graph.get_tensor_by_name(f"{network_scope}/{first_layer}/Conv2D:0")
        moving_mean = slim.get_variables(f"{first_layer}/BatchNorm/moving_mean")[0]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            inputs, _ = session.run([convolution, tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)])
            updated = session.run(moving_mean)
    np.testing.assert_allclose(updated, (1 - decay) * inputs.mean(axis=(0, 1, 2)), rtol=1e-4, atol=1e-6)
    assert nets_factory.batch_norm_decay(model_name) == 0.9997  # the official default, unchanged


def test_a_decay_for_a_network_without_batch_norm_is_refused_by_the_factory():
    with pytest.raises(ValueError, match="network 'lenet' sets no batch-norm decay"):
        nets_factory.get_network_fn("lenet", 10, batch_norm_decay=0.9)


@pytest.mark.parametrize("flags, expected", [
    (("--model_name=lenet", "--batch_norm_decay=0.9"), "error: --batch_norm_decay=0.9: network lenet has no batch"),
    (("--model_name=mobilenet_v1", "--batch_norm_decay=1.5"), "error: --batch_norm_decay=1.5 must lie between 0"),
])
def test_the_training_flag_names_itself_when_it_cannot_apply(tmp_path, flags, expected):
    check_bad_input(run_script(TRAIN_SCRIPT, f"--train_dir={tmp_path / 'train'}", "--dataset_name=fashion_mnist",
                               "--max_number_of_steps=1", *flags), expected)
