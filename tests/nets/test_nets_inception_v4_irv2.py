"""Inception-v4 and Inception-ResNet-v2 (nets/inception_v4.py, nets/inception_resnet_v2.py) against the
official TF-Slim variable table (tests/data/official_slim_variables.json.gz)."""

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from nets import inception_resnet_v2, inception_v4
from reference import assert_module_builds_official_outputs, load_reference

NETWORKS = {
    "inception_v4": (inception_v4.inception_v4, inception_v4.inception_v4_arg_scope),
    "inception_resnet_v2": (inception_resnet_v2.inception_resnet_v2, inception_resnet_v2.inception_resnet_v2_arg_scope),
}
# Smallest sizes, from the VALID layers of the paper's Figures 3-4 / 9 / 15: the last stride-2 3x3 reduction
# needs a 3x3 grid (input 75) and the auxiliary head's 5x5 pooling a 5x5 grid at the 17x17 level (input 107).
SMALLEST_WITHOUT_AUX = 75
SMALLEST_WITH_AUX = 107


def build_network(name: str, images: tf.Tensor, num_classes, **kwargs) -> tuple:
    """Build ``name`` under its own arg_scope (training mode) in the current graph."""
    network_fn, arg_scope_fn = NETWORKS[name]
    with slim.arg_scope(arg_scope_fn()):
        return network_fn(images, num_classes, is_training=True, **kwargs)


# The full-size builds (608 and 908 model variables) are the longest here; like the factory test's
# networks above 500 variables, their layout checks run with the slow tests (the default suite
# still builds inception_v4's body and checks the input-size rules of both).
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_variables_logits_and_end_points_match_official(name):
    assert_module_builds_official_outputs(name, *NETWORKS[name])


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_default_image_size(name):
    assert NETWORKS[name][0].default_image_size == load_reference()[name]["default_image_size"]


def test_features_only_without_aux_head_or_classifier():
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, SMALLEST_WITHOUT_AUX, SMALLEST_WITHOUT_AUX, 3])
        features, end_points = build_network("inception_v4", images, 0, create_aux_logits=False)
        scopes = {v.op.name.split("/")[1] for v in tf.compat.v1.model_variables()}
    assert features.shape.as_list() == [2, 1, 1, 1536]
    assert "AuxLogits" not in scopes and "Logits" not in scopes
    assert "AuxLogits" not in end_points and "Predictions" not in end_points


@pytest.mark.parametrize("name", sorted(NETWORKS))
@pytest.mark.parametrize(
    "shape, kwargs",
    [
        ([SMALLEST_WITH_AUX, SMALLEST_WITH_AUX, 3], {}),
        ([1, SMALLEST_WITH_AUX - 1, SMALLEST_WITH_AUX, 3], {}),
        ([1, SMALLEST_WITHOUT_AUX - 1, SMALLEST_WITHOUT_AUX, 3], {"create_aux_logits": False}),
        ([1, None, None, 3], {}),
    ],
)
def test_unusable_inputs_are_rejected(name, shape, kwargs):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, shape)
        with pytest.raises(ValueError, match="inputs"):
            build_network(name, images, 1001, **kwargs)


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"output_stride": 12}, "output_stride"),
        ({"output_stride": 8}, "final_endpoint"),
        ({"final_endpoint": "Mixed_8a"}, "final_endpoint"),
    ],
)
def test_inception_resnet_v2_base_rejects_bad_arguments(kwargs, argument):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 299, 299, 3])
        with pytest.raises(ValueError, match=argument):
            inception_resnet_v2.inception_resnet_v2_base(images, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_forward_pass_at_smallest_size_gives_finite_logits(name):
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, SMALLEST_WITH_AUX, SMALLEST_WITH_AUX, 3])
        logits, end_points = build_network(name, images, 1001)
        batch = np.random.default_rng(0).uniform(-1.0, 1.0, size=images.shape.as_list()).astype(np.float32)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            logits_value, aux_value = session.run([logits, end_points["AuxLogits"]], {images: batch})
    assert logits_value.shape == (2, 1001) and aux_value.shape == (2, 1001)
    assert np.all(np.isfinite(logits_value)) and np.all(np.isfinite(aux_value))


@pytest.mark.slow
@pytest.mark.parametrize("base_fn", [inception_v4.inception_v4_base, inception_resnet_v2.inception_resnet_v2_base])
def test_smallest_size_is_tight(base_fn):
    """The trunk builds at the smallest size (3x3 before the last reduction -> 1x1) and fails one pixel below."""
    size = SMALLEST_WITHOUT_AUX
    with tf.Graph().as_default():
        net, _ = base_fn(tf.compat.v1.placeholder(tf.float32, [1, size, size, 3]))
        assert net.shape.as_list()[1:3] == [1, 1]
    with tf.Graph().as_default(), pytest.raises(ValueError):
        base_fn(tf.compat.v1.placeholder(tf.float32, [1, size - 1, size - 1, 3]))


@pytest.mark.slow
@pytest.mark.parametrize("align_feature_maps, grid", [(False, 33), (True, 38)])
def test_inception_resnet_v2_output_stride_8_keeps_the_17x17_level_at_stride_8(align_feature_maps, grid):
    """299 -> 35 (VALID) or 38 (SAME) at stride 8; Mixed_6a then keeps stride 1 (a VALID 3x3 trims 35 to 33)."""
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 299, 299, 3])
        net, _ = inception_resnet_v2.inception_resnet_v2_base(
            images, final_endpoint="PreAuxLogits", output_stride=8, align_feature_maps=align_feature_maps
        )
    assert net.shape.as_list() == [1, grid, grid, 1088]
