"""nets_factory: every official name builds the official variables; lookups, arguments and errors."""

import numpy as np
import pytest
import tensorflow as tf
from reference import assert_factory_build_is_official, load_reference, network_params

from nets import nets_factory, resnet_v1, resnet_v2, vgg

REFERENCE = load_reference()
BASIC_RESNETS = {"resnet_v1_18", "resnet_v1_34"}


@pytest.mark.parametrize("name", network_params(sorted(REFERENCE)))
def test_factory_builds_the_official_variables_end_points_and_logits(name):
    assert_factory_build_is_official(name, extra_end_points=None)  # each family's test pins its extras
    network_fn = nets_factory.get_network_fn(name, REFERENCE[name]["num_classes"], is_training=True)
    assert network_fn.default_image_size == REFERENCE[name]["default_image_size"]


def test_names_are_the_official_ones_plus_the_basic_resnets():
    assert set(nets_factory.network_names()) == set(REFERENCE) | BASIC_RESNETS
    assert len(nets_factory.network_names()) == 42


def test_maps_resolve_lazily_to_the_module_functions():
    assert set(nets_factory.networks_map) == set(nets_factory.network_names())
    assert len(nets_factory.arg_scopes_map) == 42
    assert nets_factory.networks_map["vgg_16"] is vgg.vgg_16
    assert nets_factory.arg_scopes_map["resnet_v2_50"] is resnet_v2.resnet_arg_scope
    assert nets_factory.arg_scopes_map["resnet_v1_18"] is resnet_v1.resnet_arg_scope
    assert "resnet50" not in nets_factory.networks_map
    with pytest.raises(KeyError):
        nets_factory.networks_map["resnet50"]


def test_unknown_name_lists_valid_names_and_suggests_the_closest():
    with pytest.raises(ValueError) as error:
        nets_factory.get_network_fn("resnet_v1_51", 10)
    message = str(error.value)
    assert "did you mean 'resnet_v1_50'" in message
    assert all(name in message for name in nets_factory.network_names())


def test_non_string_name_raises_type_error():
    with pytest.raises(TypeError, match="name"):
        nets_factory.get_network_fn(["vgg_16"], 10)


def test_missing_module_is_named(monkeypatch):
    entry = nets_factory.NetworkEntry("nets.not_written_yet", "fake_net", "nets.not_written_yet", "fake_arg_scope")
    monkeypatch.setitem(nets_factory.NETWORK_ENTRIES, "fake_net", entry)
    with pytest.raises(ImportError, match="nets.not_written_yet"):
        nets_factory.get_network_fn("fake_net", 10)


def test_missing_function_is_named(monkeypatch):
    entry = nets_factory.NetworkEntry("nets.vgg", "vgg_99", "nets.vgg", "vgg_arg_scope")
    monkeypatch.setitem(nets_factory.NETWORK_ENTRIES, "vgg_99", entry)
    with pytest.raises(ImportError, match=r"nets\.vgg\.vgg_99"):
        nets_factory.get_network_fn("vgg_99", 10)


# Summation order is the only difference between TensorFlow's and NumPy's sums of squares.
FLOAT32_RELATIVE_TOLERANCE = 1e-5


def test_weight_decay_reaches_the_arg_scope():
    weight_decay = 4e-4
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 28, 28, 1])
        nets_factory.get_network_fn("lenet", 10, weight_decay=weight_decay)(images)
        losses = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
        weights = [v for v in tf.compat.v1.trainable_variables() if v.op.name.endswith("weights")]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            total_loss, weight_values = session.run([tf.add_n(losses), weights])
    assert len(losses) == len(weights) == 4  # conv1, conv2, fc3, fc4: every weight of LeNet's arg scope
    expected = weight_decay * sum(float(np.sum(np.square(w, dtype=np.float64))) for w in weight_values) / 2.0
    np.testing.assert_allclose(total_loss, expected, rtol=FLOAT32_RELATIVE_TOLERANCE)


def test_zero_weight_decay_adds_no_regularization():
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 28, 28, 1])
        nets_factory.get_network_fn("lenet", 10)(images)
        assert not tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)


@pytest.mark.parametrize("is_training, expect_updates", [(True, True), (False, False)])
def test_is_training_reaches_the_network(is_training, expect_updates):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, 64, 64, 3])
        nets_factory.get_network_fn("resnet_v1_18", 4, is_training=is_training)(images)
        updates = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    assert bool(updates) == expect_updates


def test_keyword_arguments_reach_the_network_and_can_be_overridden_per_call():
    network_fn = nets_factory.get_network_fn("resnet_v1_18", 4, spatial_squeeze=False)
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, 64, 64, 3])
        unsqueezed, _ = network_fn(images)
        squeezed, _ = network_fn(images, spatial_squeeze=True, reuse=True)
    assert unsqueezed.shape.as_list() == [2, 1, 1, 4]
    assert squeezed.shape.as_list() == [2, 4]
    assert network_fn.default_image_size == 224
