"""NASNet-A and PNASNet-5: official variable layout, forward passes, and the cell machinery against NumPy."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from nets._impl import nasnet_cells
from nets.nasnet import nasnet, nasnet_utils, pnasnet
from reference import assert_module_builds_official_outputs, load_reference

NETWORKS = {
    "nasnet_cifar": (nasnet.build_nasnet_cifar, nasnet.nasnet_cifar_arg_scope),
    "nasnet_mobile": (nasnet.build_nasnet_mobile, nasnet.nasnet_mobile_arg_scope),
    "nasnet_large": (nasnet.build_nasnet_large, nasnet.nasnet_large_arg_scope),
    "pnasnet_mobile": (pnasnet.build_pnasnet_mobile, pnasnet.pnasnet_mobile_arg_scope),
    "pnasnet_large": (pnasnet.build_pnasnet_large, pnasnet.pnasnet_large_arg_scope),
}
# Few cells and filters, so behaviour checks build in a second; reductions at cells 1 and 2, aux head on cell 1.
TINY_CIFAR_CONFIG = dataclasses.replace(nasnet.cifar_config(), num_cells=3, num_conv_filters=8)
TINY_IMAGENET_CONFIG = dataclasses.replace(nasnet.mobile_imagenet_config(), num_cells=3, num_conv_filters=8)
TINY_PNASNET_CONFIG = dataclasses.replace(pnasnet.mobile_imagenet_config(), num_cells=3, num_conv_filters=8)


def _variable_names(graph: tf.Graph) -> set:
    return {v.op.name for v in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)}


def _run_forward(build, images: np.ndarray, **kwargs) -> tuple:
    """Build ``build`` on ``images`` in a fresh graph; return the evaluated logits and end points."""
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        logits, end_points = build(tf.constant(images), **kwargs)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return session.run((logits, end_points))


# Every NASNet has over 900 model variables, and tf_keras checks each new variable against all
# existing ones, so even the mobile nets take ~30 s each to build on 2 cores: their official layouts
# are checked with the slow tests (like every network above reference.SLOW_ABOVE_MODEL_VARIABLES). The
# default suite builds the same cells, stems and heads with few cells and filters (TINY_* configs).


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_layout_end_points_and_global_step_match_official(name):
    assert_module_builds_official_outputs(name, *NETWORKS[name], ordered_end_points=True)


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_default_image_size_is_official(name):
    assert NETWORKS[name][0].default_image_size == load_reference()[name]["default_image_size"]


def _check_forward(name: str, image_size: int, **kwargs) -> None:
    network_fn, arg_scope_fn = NETWORKS[name]
    num_classes = load_reference()[name]["num_classes"]
    images = np.random.default_rng(0).uniform(-1.0, 1.0, (2, image_size, image_size, 3)).astype(np.float32)

    def build(inputs):
        with slim.arg_scope(arg_scope_fn()):
            return network_fn(inputs, num_classes, is_training=True, **kwargs)

    logits, end_points = _run_forward(build, images)
    assert logits.shape == (2, num_classes)
    assert end_points["AuxLogits"].shape == (2, num_classes)
    assert np.isfinite(logits).all() and np.isfinite(end_points["AuxLogits"]).all()
    np.testing.assert_allclose(end_points["Predictions"].sum(axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_nasnet_cifar_forward_pass_is_finite():
    _check_forward("nasnet_cifar", 32)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pnasnet_mobile", "nasnet_mobile"])
def test_mobile_forward_pass_at_reduced_size_is_finite(name):
    _check_forward(name, 96)


def test_tiny_pnasnet_mobile_forward_pass_is_finite():
    """PNASNet's cells, aux head and classifier, as in the slow full-size check (nasnet_mobile's
    cells run forward in test_without_classes_returns_pooled_features)."""
    _check_forward("pnasnet_mobile", 96, config=TINY_PNASNET_CONFIG)


def test_factorized_reduction_matches_numpy():
    """Half the filters see the even pixel grid, half the grid shifted by one (zero-padded), then batch norm."""
    inputs = np.random.default_rng(1).standard_normal((2, 5, 5, 4)).astype(np.float32)
    epsilon = 1e-3
    graph = tf.Graph()
    with graph.as_default():
        with slim.arg_scope(nasnet.nasnet_mobile_arg_scope(batch_norm_epsilon=epsilon)):
            with slim.arg_scope([slim.batch_norm], is_training=True):
                output = nasnet_utils.factorized_reduction(tf.constant(inputs), 7, stride=2, data_format="NHWC")
        weights = [tf.compat.v1.model_variables(f"path{i}_conv/weights")[0] for i in (1, 2)]
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            actual, even_weights, odd_weights = session.run([output] + weights)

    shifted = np.zeros_like(inputs)
    shifted[:, :-1, :-1, :] = inputs[:, 1:, 1:, :]
    even = inputs[:, ::2, ::2, :] @ even_weights[0, 0]
    odd = shifted[:, ::2, ::2, :] @ odd_weights[0, 0]
    assert even_weights.shape[-1] == 3 and odd_weights.shape[-1] == 4
    concatenated = np.concatenate([even, odd], axis=-1)
    mean = concatenated.mean(axis=(0, 1, 2))
    variance = concatenated.var(axis=(0, 1, 2))
    expected = (concatenated - mean) / np.sqrt(variance + epsilon)
    np.testing.assert_allclose(actual, expected, atol=1e-4)


def test_drop_path_drops_whole_examples_and_rescales_the_rest():
    keep_prob = 0.75
    num_examples = 4000
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(0)
        dropped = nasnet_utils.drop_path(tf.ones([num_examples, 2, 2, 3]), tf.constant(keep_prob))
        with tf.compat.v1.Session(graph=graph) as session:
            values = session.run(dropped).reshape(num_examples, -1)
    zeroed = (values == 0.0).all(axis=1)
    rescaled = np.isclose(values, 1.0 / keep_prob, rtol=1e-6).all(axis=1)
    assert (zeroed | rescaled).all()
    # Four standard deviations of the kept fraction of a Bernoulli(keep_prob) sample.
    tolerance = 4 * np.sqrt(keep_prob * (1 - keep_prob) / num_examples)
    assert abs(rescaled.mean() - keep_prob) < tolerance


@pytest.mark.parametrize("step, expected", [(250, 1 - 0.25 * 0.5 * 0.4), (5000, 1 - 0.5 * 0.4)])
def test_cell_keep_prob_scales_with_depth_and_training_progress(step, expected):
    # Cell 9 of 20 is halfway deep; the drop rate reaches its full value after total_training_steps.
    graph = tf.Graph()
    with graph.as_default():
        schedule = nasnet_cells.DropPathSchedule(
            keep_prob=0.6, total_num_cells=20, total_training_steps=1000, current_step=tf.constant(step)
        )
        keep_prob = nasnet_cells.cell_keep_prob(schedule, cell_index=9)
        with tf.compat.v1.Session(graph=graph) as session:
            assert session.run(keep_prob) == pytest.approx(expected, abs=1e-6)


def _tiny_cifar_variables(is_training: bool, num_classes: int = 10) -> set:
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, 32, 32, 3])
        with slim.arg_scope(nasnet.nasnet_cifar_arg_scope()):
            nasnet.build_nasnet_cifar(images, num_classes, is_training=is_training, config=TINY_CIFAR_CONFIG)
    return _variable_names(graph)


def test_inference_graph_has_no_aux_head_and_no_drop_path():
    training = _tiny_cifar_variables(is_training=True)
    inference = _tiny_cifar_variables(is_training=False)
    assert inference < training
    assert all(name.startswith("aux_1/aux_logits/") or name.endswith("global_step") for name in training - inference)
    assert any(name.endswith("global_step") for name in training)


def test_without_classes_returns_pooled_features():
    images = np.zeros((2, 32, 32, 3), np.float32)

    def build(inputs):
        with slim.arg_scope(nasnet.nasnet_cifar_arg_scope()):
            return nasnet.build_nasnet_cifar(inputs, 0, is_training=False, config=TINY_CIFAR_CONFIG)

    features, end_points = _run_forward(build, images)
    assert features.shape == (2, end_points["Cell_2"].shape[-1])
    assert "Logits" not in end_points and "AuxLogits" not in end_points


@pytest.mark.parametrize("build_fn", [nasnet.build_nasnet_mobile, pnasnet.build_pnasnet_mobile])
def test_final_endpoint_stops_the_build(build_fn):
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        with slim.arg_scope(nasnet.nasnet_mobile_arg_scope()):
            net, end_points = build_fn(images, 10, final_endpoint="Cell_0", config=TINY_IMAGENET_CONFIG)
    assert list(end_points) == ["Stem", "Cell_0"]
    assert net is end_points["Cell_0"]
    assert not any(name.startswith(("cell_1/", "final_layer/")) for name in _variable_names(graph))


def test_unknown_final_endpoint_is_rejected():
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 96, 96, 3])
        with pytest.raises(ValueError, match="final_endpoint"):
            nasnet.build_nasnet_mobile(images, 10, final_endpoint="Mixed_5b", config=TINY_IMAGENET_CONFIG)


def test_images_too_small_for_the_aux_head_are_rejected():
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        with pytest.raises(ValueError, match="too small for the auxiliary head"):
            nasnet.build_nasnet_mobile(images, 10, config=TINY_IMAGENET_CONFIG)


@pytest.mark.parametrize(
    "shape, kwargs, error",
    [
        ([32, 32, 3], {}, ValueError),
        ([1, None, None, 3], {}, ValueError),
        ([1, 32, 32, 3], {"num_classes": -1}, ValueError),
        ([1, 32, 32, 3], {"config": {"num_cells": 3}}, TypeError),
    ],
)
def test_bad_arguments_are_rejected(shape, kwargs, error):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, shape)
        with pytest.raises(error):
            nasnet.build_nasnet_cifar(images, **{"num_classes": 10, **kwargs})


def test_bad_configurations_are_rejected():
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 32, 32, 3])
        config = dataclasses.replace(TINY_CIFAR_CONFIG, drop_path_keep_prob=0.0)
        with pytest.raises(ValueError, match="drop_path_keep_prob"):
            nasnet.build_nasnet_cifar(images, 10, config=config)
        with pytest.raises(ValueError, match="data_format"):
            nasnet.build_nasnet_cifar(images, 10, config=dataclasses.replace(TINY_CIFAR_CONFIG, data_format="NWHC"))
    with pytest.raises(ValueError, match="inputs"):
        nasnet_cells.CellSpec(
            operations=(nasnet_cells.Identity(),) * 10, inputs=(1, 1, 0, 0, 0, 0, 4, 0, 1, 7), excluded_states=(0,)
        )
