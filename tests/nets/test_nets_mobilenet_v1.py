"""MobileNet v1 and its width variants: official layout, end points, forward pass, body options."""


import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from nets import mobilenet_v1 as mobilenet_v1_module
from nets.mobilenet_v1 import mobilenet_v1_arg_scope, mobilenet_v1_base
from nets_checks import Build, assert_forward_pass_gives_softmax, builder
from reference import assert_module_builds_official_outputs, load_reference, network_params

NAMES = ["mobilenet_v1", "mobilenet_v1_075", "mobilenet_v1_050", "mobilenet_v1_025"]


def _builder(name: str) -> Build:
    return builder(getattr(mobilenet_v1_module, name), lambda: mobilenet_v1_arg_scope(is_training=True))


@pytest.mark.parametrize("name", network_params(NAMES))
def test_variables_and_end_points_match_official(name: str) -> None:
    assert_module_builds_official_outputs(name, getattr(mobilenet_v1_module, name), mobilenet_v1_arg_scope)


@pytest.mark.parametrize("name", NAMES)
def test_default_image_size_is_official(name: str) -> None:
    assert getattr(mobilenet_v1_module, name).default_image_size == load_reference()[name]["default_image_size"]


def test_forward_pass_at_small_size_gives_finite_logits_and_softmax() -> None:
    batch = np.random.default_rng(0).uniform(-1.0, 1.0, size=(2, 32, 32, 3)).astype(np.float32)
    assert_forward_pass_gives_softmax(_builder("mobilenet_v1_025"), batch, num_classes=5)


def test_zero_classes_returns_pooled_features() -> None:
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, 224, 224, 3])
        features, end_points = _builder("mobilenet_v1_050")(images, 0)
    assert features.shape.as_list() == [2, 1, 1, 512]
    assert "Logits" not in end_points


def test_global_pool_handles_large_inputs() -> None:
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 320, 320, 3])
        with slim.arg_scope(mobilenet_v1_arg_scope()):
            logits, end_points = mobilenet_v1_module.mobilenet_v1_025(images, num_classes=10, global_pool=True)
    assert end_points["global_pool"].shape.as_list() == [1, 1, 1, 256]
    assert logits.shape.as_list() == [1, 10]


@pytest.mark.parametrize(("output_stride", "expected_size"), [(None, 2), (16, 4), (8, 8)])
def test_output_stride_caps_downsampling(output_stride, expected_size: int) -> None:
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        with slim.arg_scope(mobilenet_v1_arg_scope()):
            features, _ = mobilenet_v1_base(images, depth_multiplier=0.25, output_stride=output_stride)
    assert features.shape.as_list() == [1, expected_size, expected_size, 256]


def test_explicit_padding_equals_same_padding_where_same_pads_symmetrically() -> None:
    """On a 17x17 input SAME pads a stride-2 3x3 convolution by (1, 1), exactly what explicit padding does."""
    batch = np.random.default_rng(1).normal(size=(1, 17, 17, 3)).astype(np.float32)
    outputs = {}
    for explicit in (False, True):
        with tf.Graph().as_default():
            tf.compat.v1.set_random_seed(3)
            with slim.arg_scope(mobilenet_v1_arg_scope(is_training=False)):
                features, _ = mobilenet_v1_base(
                    tf.constant(batch), final_endpoint="Conv2d_1_depthwise", use_explicit_padding=explicit
                )
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                outputs[explicit] = session.run(features)
    assert outputs[True].shape == (1, 9, 9, 32)
    np.testing.assert_allclose(outputs[True], outputs[False], atol=1e-5)


def test_final_endpoint_stops_the_body_early() -> None:
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        with slim.arg_scope(mobilenet_v1_arg_scope()):
            features, end_points = mobilenet_v1_base(images, final_endpoint="Conv2d_3_depthwise")
        variable_names = [v.op.name for v in tf.compat.v1.global_variables()]
    assert list(end_points)[-1] == "Conv2d_3_depthwise"
    assert features.shape.as_list() == [1, 16, 16, 128]
    assert not any(name.startswith("MobilenetV1/Conv2d_3_pointwise") for name in variable_names)


def test_depthwise_weights_are_regularized_only_on_request() -> None:
    counts = {}
    for regularize in (False, True):
        with tf.Graph().as_default():
            images = tf.compat.v1.placeholder(tf.float32, [1, 32, 32, 3])
            with slim.arg_scope(mobilenet_v1_arg_scope(regularize_depthwise=regularize)):
                mobilenet_v1_module.mobilenet_v1(images, num_classes=10)
            counts[regularize] = len(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES))
    assert counts[True] - counts[False] == 13


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"depth_multiplier": 0.0}, "depth_multiplier"),
        ({"output_stride": 4}, "output_stride"),
        ({"final_endpoint": "Conv2d_14_pointwise"}, "final_endpoint"),
    ],
)
def test_bad_body_arguments_are_named_in_the_error(kwargs: dict, argument: str) -> None:
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 32, 32, 3])
        with pytest.raises(ValueError, match=argument):
            mobilenet_v1_base(images, **kwargs)


def test_non_image_input_is_rejected() -> None:
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="inputs"):
            mobilenet_v1_module.mobilenet_v1(tf.compat.v1.placeholder(tf.float32, [1, 32, 32]))
