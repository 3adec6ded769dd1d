"""CifarNet and LeNet: official variable layout, end points, and a real forward pass."""


import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from nets.cifarnet import cifarnet, cifarnet_arg_scope
from nets.lenet import lenet, lenet_arg_scope
from nets_checks import Build, assert_forward_pass_gives_softmax, builder
from reference import assert_module_builds_official_outputs, load_reference

NETWORKS = {
    "cifarnet": (cifarnet, cifarnet_arg_scope),
    "lenet": (lenet, lenet_arg_scope),
}


def _builder(name: str, **kwargs) -> Build:
    network_fn, arg_scope_fn = NETWORKS[name]
    return builder(network_fn, arg_scope_fn, **kwargs)


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_variables_and_end_points_match_official(name: str) -> None:
    assert_module_builds_official_outputs(name, *NETWORKS[name])


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_default_image_size_is_official(name: str) -> None:
    network_fn, _ = NETWORKS[name]
    assert network_fn.default_image_size == load_reference()[name]["default_image_size"]


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_forward_pass_gives_finite_logits_and_softmax_predictions(name: str) -> None:
    size = load_reference()[name]["default_image_size"]
    batch = np.random.default_rng(0).uniform(-1.0, 1.0, size=(2, size, size, 3)).astype(np.float32)
    assert_forward_pass_gives_softmax(_builder(name), batch, num_classes=7)


@pytest.mark.parametrize(("name", "feature_width"), [("cifarnet", 192), ("lenet", 1024)])
def test_zero_classes_returns_features_without_classifier(name: str, feature_width: int) -> None:
    size = load_reference()[name]["default_image_size"]
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, size, size, 3])
        features, end_points = _builder(name)(images, 0)
        variable_names = [v.op.name for v in tf.compat.v1.global_variables()]
    assert features.shape.as_list() == [2, feature_width]
    # The official networks return their last hidden layer, before any dropout.
    assert features is end_points[{"cifarnet": "fc4", "lenet": "fc3"}[name]]
    assert "Logits" not in end_points and "Predictions" not in end_points and "dropout3" not in end_points
    classifier_scope = {"cifarnet": "CifarNet/logits/", "lenet": "LeNet/fc4/"}[name]
    assert not any(n.startswith(classifier_scope) for n in variable_names)


def test_cifarnet_weight_decay_skips_the_logits_layer() -> None:
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 32, 32, 3])
        _builder("cifarnet")(images, 10)
        losses = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
        regularized = sorted(loss.op.name.split("/")[1] for loss in losses)
    assert regularized == ["fc3", "fc4"]


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_an_enclosing_reusing_scope_shares_variables(name: str) -> None:
    """The official functions take no ``reuse``: an outer variable scope with ``reuse=True`` shares them."""
    network_fn, arg_scope_fn = NETWORKS[name]
    size = load_reference()[name]["default_image_size"]
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, size, size, 3])
        with slim.arg_scope(arg_scope_fn()):
            network_fn(images, num_classes=10)
            count = len(tf.compat.v1.global_variables())
            with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(), reuse=True):
                network_fn(images, num_classes=10)
        assert len(tf.compat.v1.global_variables()) == count
