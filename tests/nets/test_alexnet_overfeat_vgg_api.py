"""The public API of ``nets.alexnet``, ``nets.overfeat`` and ``nets.vgg`` (official TF-Slim definitions).

Here: each factory name builds exactly the official variables and end points (no ``Predictions``);
the logits equal tf_slim's own definitions on shared variables; and the official arguments behave
as documented: ``global_pool`` on larger inputs, pre-logits features for ``num_classes`` None or
0, ``spatial_squeeze``, VGG's ``reuse`` and ``fc_conv_padding``, and the ``vgg_d``/``vgg_e`` names.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from reference import assert_module_builds_official_outputs, load_reference
from tf_slim.nets import alexnet as slim_alexnet
from tf_slim.nets import overfeat as slim_overfeat
from tf_slim.nets import vgg as slim_vgg

from nets import alexnet, overfeat, vgg

FUNCTIONS = {
    "alexnet_v2": (alexnet.alexnet_v2, alexnet.alexnet_v2_arg_scope),
    "overfeat": (overfeat.overfeat, overfeat.overfeat_arg_scope),
    "vgg_a": (vgg.vgg_a, vgg.vgg_arg_scope),
    "vgg_16": (vgg.vgg_16, vgg.vgg_arg_scope),
    "vgg_19": (vgg.vgg_19, vgg.vgg_arg_scope),
}
TF_SLIM_DEFINITIONS = {
    "alexnet_v2": slim_alexnet.alexnet_v2,
    "overfeat": slim_overfeat.overfeat,
    "vgg_a": slim_vgg.vgg_a,
}
# Outputs of the same float32 graph computed two ways; only summation order may differ.
FLOAT32_TOLERANCE = 1e-5


def _size(name: str) -> int:
    return load_reference()[name]["default_image_size"]


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_factory_name_builds_exactly_the_official_outputs(name):
    assert_module_builds_official_outputs(name, *FUNCTIONS[name], extra_end_points=())
    assert FUNCTIONS[name][0].default_image_size == _size(name)


# A forward pass of OverFeat or VGG at full size takes several seconds on a small CPU; AlexNet is quick.
@pytest.mark.parametrize(
    "name",
    [name if name == "alexnet_v2" else pytest.param(name, marks=pytest.mark.slow) for name in TF_SLIM_DEFINITIONS]
)
def test_logits_equal_tf_slim_definition(name):
    network, arg_scope = FUNCTIONS[name]
    shape = [1, _size(name), _size(name), 3]
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, shape)
        with slim.arg_scope(arg_scope()):
            logits, _ = network(images, num_classes=6, is_training=False)
            tf.compat.v1.get_variable_scope().reuse_variables()
            reference, _ = TF_SLIM_DEFINITIONS[name](images, num_classes=6, is_training=False)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            batch = np.random.RandomState(0).uniform(-1.0, 1.0, shape).astype(np.float32)
            ours, theirs = session.run([logits, reference], {images: batch})
    assert ours.shape == (1, 6)
    assert np.abs(ours).max() > 0
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=FLOAT32_TOLERANCE)


@pytest.mark.parametrize(
    "network, size, fc7_scope",
    [
        (alexnet.alexnet_v2, 224, "alexnet_v2/fc7"),
        (overfeat.overfeat, 231, "overfeat/fc7"),
        (vgg.vgg_16, 224, "vgg_16/fc7"),
    ],
)
@pytest.mark.parametrize("num_classes", [None, 0])
def test_no_classes_returns_fc7_features_without_a_classifier(network, size, fc7_scope, num_classes):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, size, size, 3])
        features, end_points = network(images, num_classes=num_classes)
        variable_names = [v.op.name for v in tf.compat.v1.global_variables()]
    assert features is end_points[fc7_scope]
    assert features.shape.as_list() == [2, 1, 1, 4096]
    assert not [name for name in variable_names if "/fc8/" in name]
    assert not [key for key in end_points if "fc8" in key or key.lower() == "predictions"]


@pytest.mark.parametrize(
    "network, size, local_shape",
    [(alexnet.alexnet_v2, 256, [2, 2]), (overfeat.overfeat, 281, [2, 2]), (vgg.vgg_a, 256, [2, 2])],
)
def test_global_pool_averages_the_map_of_a_larger_input(network, size, local_shape):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, size, size, 3])
        logits_map, _ = network(images, num_classes=5, spatial_squeeze=False)
        pooled, end_points = network(images, num_classes=5, global_pool=True, scope="pooled")
        features, _ = network(images, num_classes=None, global_pool=True, scope="features")
    assert logits_map.shape.as_list() == [1, *local_shape, 5]
    assert pooled.shape.as_list() == [1, 5]
    assert end_points["global_pool"].shape.as_list() == [1, 1, 1, 4096]
    assert features.shape.as_list() == [1, 1, 1, 4096]


def test_vgg_same_fc_padding_keeps_the_pool5_resolution():
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        logits, end_points = vgg.vgg_16(images, num_classes=3, spatial_squeeze=False, fc_conv_padding="SAME")
    assert end_points["vgg_16/pool5"].shape.as_list() == [1, 2, 2, 512]
    assert end_points["vgg_16/fc6"].shape.as_list() == [1, 2, 2, 4096]
    assert logits.shape.as_list() == [1, 2, 2, 3]


def test_vgg_reuse_shares_every_variable():
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 224, 224, 3])
        vgg.vgg_a(images, num_classes=3)
        count = len(tf.compat.v1.global_variables())
        _, end_points = vgg.vgg_a(images, num_classes=3, reuse=True)
        assert len(tf.compat.v1.global_variables()) == count
    assert "vgg_a/fc8" in end_points


def test_vgg_d_and_e_are_the_16_and_19_layer_configurations():
    assert vgg.vgg_d is vgg.vgg_16
    assert vgg.vgg_e is vgg.vgg_19
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 224, 224, 3])
        vgg.vgg_e(images, num_classes=3)
        convs = {v.op.name.split("/")[2] for v in tf.compat.v1.model_variables() if "/conv" in v.op.name}
    assert len(convs) == 16  # 19 weight layers: 16 convolutions and fc6-fc8


@pytest.mark.parametrize("network", [alexnet.alexnet_v2, overfeat.overfeat, vgg.vgg_16])
def test_squeezed_logits_are_the_fc8_end_point(network):
    size = network.default_image_size
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, size, size, 3])
        logits, end_points = network(images, num_classes=4)
    assert logits.op.name.endswith("fc8/squeezed")
    assert end_points[logits.op.name.split("/")[0] + "/fc8"] is logits
