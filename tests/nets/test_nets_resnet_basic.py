"""Structure and forward checks of ResNet-18/34 (``nets.resnet_v1``, units in nets/_impl/basic_resnet.py).

No official checkpoint exists for these two, so the expected layout is derived
here, independently of the module, from Table 1 of He et al. 2016
("Deep Residual Learning for Image Recognition").
"""

import re

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from nets import resnet_v1
from nets._impl import basic_resnet

NETWORKS = {
    "resnet_v1_18": resnet_v1.resnet_v1_18,
    "resnet_v1_34": resnet_v1.resnet_v1_34,
}
# Paper, Table 1: basic units per stage (conv2_x .. conv5_x) and their widths.
PAPER_UNITS = {"resnet_v1_18": (2, 2, 2, 2), "resnet_v1_34": (3, 4, 6, 3)}
PAPER_WIDTHS = (64, 128, 256, 512)
# Published totals of the same architecture (torchvision resnet18 / resnet34, 1000 classes).
PUBLISHED_PARAMETERS = {"resnet_v1_18": 11_689_512, "resnet_v1_34": 21_797_672}
NUM_CLASSES = 1000

VARIABLE_NAME = re.compile(
    r"^(?P<net>resnet_v1_\d+)/"
    r"(?P<layer>conv1|logits|block(?P<block>[1-4])/unit_(?P<unit>\d+)/basic_block/(?P<conv>conv1|conv2|shortcut))/"
    r"(?P<param>weights|biases|BatchNorm/(gamma|beta|moving_mean|moving_variance))$"
)


def paper_trainable_parameters(units_per_stage: tuple, num_classes: int) -> int:
    """Trainable parameters of a basic-block ResNet: conv kernels, BN beta+gamma, FC weights+biases."""

    def conv_bn(kernel: int, depth_in: int, depth_out: int) -> int:
        return kernel * kernel * depth_in * depth_out + 2 * depth_out

    total = conv_bn(7, 3, 64)
    depth_in = 64
    for width, units in zip(PAPER_WIDTHS, units_per_stage):
        for _ in range(units):
            total += conv_bn(3, depth_in, width) + conv_bn(3, width, width)
            if depth_in != width:
                total += conv_bn(1, depth_in, width)
            depth_in = width
    return total + PAPER_WIDTHS[-1] * num_classes + num_classes


def build(name: str, shape: list, **kwargs) -> tuple:
    """Build ``name`` in a fresh graph under ``resnet_arg_scope``; return (graph, images, logits, end_points)."""
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, shape)
        with slim.arg_scope(resnet_v1.resnet_arg_scope()):
            logits, end_points = NETWORKS[name](images, **kwargs)
    return graph, images, logits, end_points


def test_paper_formula_matches_published_totals():
    for name, units in PAPER_UNITS.items():
        assert paper_trainable_parameters(units, NUM_CLASSES) == PUBLISHED_PARAMETERS[name]


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_trainable_parameter_count_matches_paper(name):
    graph, _, _, _ = build(name, [1, 224, 224, 3])
    with graph.as_default():
        built = sum(int(np.prod(v.shape.as_list())) for v in tf.compat.v1.trainable_variables())
    assert built == paper_trainable_parameters(PAPER_UNITS[name], NUM_CLASSES)


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_variable_names_follow_slim_resnet_convention(name):
    graph, _, _, _ = build(name, [1, 224, 224, 3])
    with graph.as_default():
        names = [v.op.name for v in tf.compat.v1.model_variables()]
    matches = [VARIABLE_NAME.match(n) for n in names]
    assert all(matches), [n for n, m in zip(names, matches) if not m]
    assert {m["net"] for m in matches} == {name}

    units_seen = {}
    shortcuts = set()
    for m in matches:
        if m["block"]:
            block = int(m["block"])
            units_seen.setdefault(block, set()).add(int(m["unit"]))
            if m["conv"] == "shortcut":
                shortcuts.add((block, int(m["unit"])))
    assert tuple(len(units_seen[b]) for b in (1, 2, 3, 4)) == PAPER_UNITS[name]
    assert all(units_seen[b] == set(range(1, len(units_seen[b]) + 1)) for b in units_seen)
    # Projection shortcuts exactly where the width grows: first unit of blocks 2-4.
    assert shortcuts == {(2, 1), (3, 1), (4, 1)}
    assert f"{name}/logits/biases" in names
    assert f"{name}/conv1/BatchNorm/moving_variance" in names


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_default_image_size(name):
    assert NETWORKS[name].default_image_size == 224


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_forward_pass_64x64_gives_finite_logits(name):
    graph, images, logits, end_points = build(name, [2, 64, 64, 3])
    with graph.as_default(), tf.compat.v1.Session(graph=graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        batch = np.random.default_rng(0).uniform(-1.0, 1.0, size=(2, 64, 64, 3)).astype(np.float32)
        logits_value, predictions = session.run([logits, end_points["predictions"]], {images: batch})
    assert logits_value.shape == (2, NUM_CLASSES)
    assert np.all(np.isfinite(logits_value))
    np.testing.assert_allclose(predictions.sum(axis=1), 1.0, rtol=1e-5)


def test_output_stride_is_32():
    _, _, features, end_points = build("resnet_v1_18", [1, 96, 96, 3], num_classes=None, global_pool=False)
    assert features.shape.as_list() == [1, 3, 3, 512]
    block_sizes = [end_points[f"resnet_v1_18/block{b}"].shape.as_list()[1] for b in (1, 2, 3, 4)]
    assert block_sizes == [96 // 8, 96 // 16, 96 // 32, 96 // 32]


def test_output_stride_16_uses_dilation_instead_of_the_last_stride():
    _, _, features, _ = build("resnet_v1_18", [1, 96, 96, 3], num_classes=None, global_pool=False, output_stride=16)
    assert features.shape.as_list() == [1, 6, 6, 512]


def test_without_classes_returns_pooled_features_and_no_logits_variables():
    graph, _, features, end_points = build("resnet_v1_18", [2, 64, 64, 3], num_classes=0)
    assert features.shape.as_list() == [2, 1, 1, 512]
    assert "predictions" not in end_points
    with graph.as_default():
        assert not [v for v in tf.compat.v1.model_variables() if "/logits/" in v.op.name]


def test_reuse_creates_no_new_variables():
    graph, images, _, _ = build("resnet_v1_18", [1, 64, 64, 3])
    with graph.as_default():
        count = len(tf.compat.v1.global_variables())
        with slim.arg_scope(resnet_v1.resnet_arg_scope()):
            resnet_v1.resnet_v1_18(images, reuse=True)
        assert len(tf.compat.v1.global_variables()) == count


@pytest.mark.parametrize(
    "kwargs, shape, argument",
    [
        ({}, [64, 64, 3], "inputs"),
        ({"output_stride": 6}, [1, 64, 64, 3], "output_stride"),
        ({"num_classes": -1}, [1, 64, 64, 3], "num_classes"),
    ],
)
def test_bad_arguments_are_rejected_by_name(kwargs, shape, argument):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, shape)
        with pytest.raises(ValueError, match=argument):
            resnet_v1.resnet_v1_18(images, **kwargs)


@pytest.mark.parametrize("depth, stride", [(4, 1), (4, 2), (6, 2)])
def test_basic_block_matches_float32_reference(depth, stride):
    """Without BN (plain slim defaults: biases, ReLU) the unit must equal relu(shortcut + conv2(relu(conv1))).

    The reference is written with tf.nn.conv2d on the same variables; tolerance 1e-5 (float32).
    """
    graph = tf.Graph()
    with graph.as_default():
        inputs = tf.constant(np.random.default_rng(1).normal(size=(2, 8, 8, 4)).astype(np.float32))
        output = basic_resnet.basic_block(inputs, depth=depth, stride=stride, scope="unit")
        weights = {v.op.name: v for v in tf.compat.v1.global_variables()}

        def conv(x, layer, stride_, padding):
            y = tf.nn.conv2d(x, weights[f"unit/{layer}/weights"], strides=stride_, padding=padding)
            return y + weights[f"unit/{layer}/biases"]

        padded = tf.pad(inputs, [[0, 0], [1, 1], [1, 1], [0, 0]]) if stride > 1 else inputs
        hidden = tf.nn.relu(conv(padded, "conv1", stride, "VALID" if stride > 1 else "SAME"))
        residual = conv(hidden, "conv2", 1, "SAME")
        if depth == 4:
            shortcut = inputs[:, ::stride, ::stride, :]
        else:
            shortcut = conv(inputs, "shortcut", stride, "VALID")
        reference = tf.nn.relu(shortcut + residual)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            actual, expected = session.run([output, reference])
    assert actual.shape == (2, 8 // stride, 8 // stride, depth)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
