"""The zoo modules built on tf_slim's own nets: inception v1-v3.

Here: the official layout, end points and logits of each module function (through the
factory's shared build, after checking that the factory maps the name to that function),
numerical agreement with tf_slim's definitions (the wrappers must not change the
computation), small forward passes and the pre-logits mode. AlexNet, OverFeat, VGG and the
ResNets have their own files (``test_alexnet_overfeat_vgg_api.py``, ``test_resnet_api.py``).
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from reference import assert_module_builds_official_outputs, factory_build, load_reference
from tf_slim.nets import inception as slim_inception

from nets import inception

FUNCTIONS = {
    "inception_v1": (inception.inception_v1, inception.inception_v3_arg_scope),
    "inception_v2": (inception.inception_v2, inception.inception_v3_arg_scope),
    "inception_v3": (inception.inception_v3, inception.inception_v3_arg_scope),
}

# Outputs of the same float32 graph computed two ways; only summation order may differ.
FLOAT32_TOLERANCE = 1e-5


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_official_variables_end_points_logits_and_image_size(name):
    assert_module_builds_official_outputs(name, *FUNCTIONS[name], extra_end_points=None)
    entry = load_reference()[name]
    assert factory_build(name).end_point_shapes["Predictions"] == entry["logits_shape"]
    assert FUNCTIONS[name][0].default_image_size == entry["default_image_size"]


def _run(fetches, images: tf.Tensor, batch: np.ndarray):
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        return session.run(fetches, {images: batch})


def _random_batch(shape: list) -> np.ndarray:
    return np.random.RandomState(0).uniform(-1.0, 1.0, shape).astype(np.float32)


@pytest.mark.parametrize(
    "name, theirs, scope, size",
    [
        ("inception_v2", slim_inception.inception_v2, "InceptionV2", 64),
        ("inception_v1", slim_inception.inception_v1, "InceptionV1", 224),
    ],
)
def test_logits_equal_tf_slim_definition(name, theirs, scope, size):
    """Sharing the variables (reuse), our logits equal tf_slim's, squeezed."""
    ours, arg_scope = FUNCTIONS[name]
    num_classes, shape = 5, [2, size, size, 3]
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, shape)
        with slim.arg_scope(arg_scope()):
            logits, end_points = ours(images, num_classes=num_classes, is_training=False, scope=scope)
            reference_logits, _ = theirs(images, num_classes=num_classes, is_training=False, reuse=True, scope=scope)
        ours_value, reference_value, predictions = _run(
            [logits, reference_logits, end_points["Predictions"]], images, _random_batch(shape)
        )
    assert ours_value.shape == (2, num_classes)
    np.testing.assert_allclose(ours_value, reference_value.reshape(2, num_classes), rtol=0, atol=FLOAT32_TOLERANCE)
    np.testing.assert_allclose(predictions.sum(axis=1), 1.0, atol=FLOAT32_TOLERANCE)


@pytest.mark.parametrize("name", ["inception_v2"])
def test_training_forward_pass_is_finite(name):
    network, arg_scope = FUNCTIONS[name]
    num_classes, shape = 7, [2, 64, 64, 3]
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, shape)
        with slim.arg_scope(arg_scope()):
            logits, _ = network(images, num_classes=num_classes, is_training=True)
        value = _run(logits, images, _random_batch(shape))
    assert value.shape == (2, num_classes)
    assert np.all(np.isfinite(value))


@pytest.mark.parametrize(
    "network, feature_key, channels, num_classes",
    [
        (inception.inception_v1, "AvgPool_0a_7x7", 1024, 0),
        (inception.inception_v2, "AvgPool_1a", 1024, None),
    ],
)
def test_no_classes_returns_pooled_features_without_logits(network, feature_key, channels, num_classes):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, 64, 64, 3])
        features, end_points = network(images, num_classes=num_classes)
        variable_names = [v.op.name for v in tf.compat.v1.global_variables()]
    assert features is end_points[feature_key]
    assert features.shape.as_list() == [2, 1, 1, channels]
    assert "Predictions" not in end_points
    assert not [name for name in variable_names if "logits" in name.lower()]


def test_inception_global_pool_accepts_larger_inputs():
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 320, 320, 3])
        logits, end_points = inception.inception_v1(images, num_classes=3, global_pool=True)
    assert end_points["global_pool"].shape.as_list() == [1, 1, 1, 1024]
    assert logits.shape.as_list() == [1, 3]


@pytest.mark.parametrize(
    "network, bad_argument",
    [
        (inception.inception_v3, {"depth_multiplier": 0.0}),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(network, bad_argument):
    argument = next(iter(bad_argument))
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 224, 224, 3])
        with pytest.raises(ValueError, match=argument):
            network(images, **bad_argument)


@pytest.mark.slow
def test_inception_v3_logits_and_aux_logits_equal_tf_slim_definition():
    num_classes, shape = 5, [1, 299, 299, 3]
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, shape)
        with slim.arg_scope(inception.inception_v3_arg_scope()):
            logits, end_points = inception.inception_v3(images, num_classes=num_classes, is_training=False)
            reference_logits, reference_end_points = slim_inception.inception_v3(
                images, num_classes=num_classes, is_training=False, reuse=True
            )
        values = _run(
            [logits, end_points["AuxLogits"], reference_logits, reference_end_points["AuxLogits"]],
            images,
            _random_batch(shape),
        )
    np.testing.assert_allclose(values[0], values[2], rtol=0, atol=FLOAT32_TOLERANCE)
    np.testing.assert_allclose(values[1], values[3], rtol=0, atol=FLOAT32_TOLERANCE)
