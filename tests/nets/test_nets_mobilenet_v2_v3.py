"""MobileNet v2 / v3 / EdgeTPU: official variable layout, end points, depth rounding, blocks, forward passes."""

from typing import Callable, Dict

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from nets.mobilenet import conv_blocks, mobilenet_v2, mobilenet_v3
from nets.mobilenet import mobilenet as lib
from nets_checks import Build, assert_forward_pass_gives_softmax, builder
from reference import assert_module_builds_official_outputs, load_reference, network_params

# Factory name -> (network function, arg scope function) of the official modules.
NETWORKS = {
    "mobilenet_v2": (mobilenet_v2.mobilenet, mobilenet_v2.training_scope),
    "mobilenet_v2_140": (mobilenet_v2.mobilenet_v2_140, mobilenet_v2.training_scope),
    "mobilenet_v2_035": (mobilenet_v2.mobilenet_v2_035, mobilenet_v2.training_scope),
    "mobilenet_v3_small": (mobilenet_v3.small, mobilenet_v3.training_scope),
    "mobilenet_v3_large": (mobilenet_v3.large, mobilenet_v3.training_scope),
    "mobilenet_v3_small_minimalistic": (mobilenet_v3.small_minimalistic, mobilenet_v3.training_scope),
    "mobilenet_v3_large_minimalistic": (mobilenet_v3.large_minimalistic, mobilenet_v3.training_scope),
    "mobilenet_edgetpu": (mobilenet_v3.edge_tpu, mobilenet_v3.training_scope),
    "mobilenet_edgetpu_075": (mobilenet_v3.edge_tpu_075, mobilenet_v3.training_scope),
}
SMALL_NETWORKS = ["mobilenet_v2_035", "mobilenet_v3_small", "mobilenet_v3_small_minimalistic", "mobilenet_edgetpu_075"]
# (scaled network, its full-width counterpart, multiplier): the official width variants.
WIDTH_VARIANTS = [
    ("mobilenet_v2_140", "mobilenet_v2", 1.4),
    ("mobilenet_v2_035", "mobilenet_v2", 0.35),
    ("mobilenet_edgetpu_075", "mobilenet_edgetpu", 0.75),
]

SMALLEST_IMAGE_SIZE = 32  # total stride of every MobileNet body
FLOAT32_TOLERANCE = 1e-5
# The official squeeze-excite gate scale (a literal in the official code) and the exact 1/6 of its hard-swish,
# as float32. They differ by 2e-5 relative: a saturated gate is 1.00002 instead of 1.
OFFICIAL_GATE_SCALE = np.float32(0.16667)
ONE_SIXTH = np.float32(1.0 / 6.0)
# One float32 rounding per operation, relative: tight enough to tell the two scales apart.
GATE_RTOL = 1e-6


def _builder(name: str) -> Build:
    network_fn, arg_scope_fn = NETWORKS[name]
    return builder(network_fn, arg_scope_fn)


def _output_depths(name: str) -> Dict[str, int]:
    """Output depth of every weight variable of the official network ``name``, keyed by its scope."""
    return {
        var_name.rsplit("/", 1)[0]: shape[-1]
        for var_name, shape, _ in load_reference()[name]["model_variables"]
        if var_name.endswith("/weights")
    }


@pytest.mark.parametrize("name", network_params(sorted(NETWORKS)))
def test_variables_end_points_and_logits_match_official_layout(name: str) -> None:
    assert_module_builds_official_outputs(name, *NETWORKS[name])


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_default_image_size_is_official(name: str) -> None:
    network_fn, _ = NETWORKS[name]
    assert network_fn.default_image_size == load_reference()[name]["default_image_size"]


@pytest.mark.parametrize(("scaled", "full", "multiplier"), WIDTH_VARIANTS)
def test_depth_rule_reproduces_official_width_variants(scaled: str, full: str, multiplier: float) -> None:
    """Each stem, project and last-conv depth of a scaled checkpoint is the rounded, scaled full-width depth.

    Below multiplier 1 the official variants keep the last conv (``Conv_1``) at full width.
    """
    full_depths = _output_depths(full)
    scaled_depths = _output_depths(scaled)
    assert scaled_depths.keys() == full_depths.keys()
    for scope, depth in full_depths.items():
        if "/Logits/" in scope or scope.endswith("/expand"):
            continue
        kept = scope.endswith("/Conv_1") and multiplier < 1
        params = {"num_outputs": depth}
        lib.depth_multiplier(params, multiplier)
        assert scaled_depths[scope] == (depth if kept else params["num_outputs"]), scope


def test_finegrain_mode_keeps_the_last_layer_only_below_multiplier_one() -> None:
    def last_depth(network_fn: Callable, **kwargs) -> int:
        with tf.Graph().as_default():
            images = tf.compat.v1.placeholder(tf.float32, [1, SMALLEST_IMAGE_SIZE, SMALLEST_IMAGE_SIZE, 3])
            features, _ = network_fn(images, num_classes=0, **kwargs)
        return features.shape[-1]

    assert last_depth(mobilenet_v2.mobilenet, depth_multiplier=0.35) == 1280 * 0.35
    assert last_depth(mobilenet_v2.mobilenet_v2_035) == 1280
    assert last_depth(mobilenet_v2.mobilenet, depth_multiplier=1.4, finegrain_classification_mode=True) == 1792


@pytest.mark.parametrize("name", SMALL_NETWORKS)
def test_forward_pass_gives_finite_logits_and_softmax_predictions(name: str) -> None:
    images = np.random.default_rng(0).uniform(-1.0, 1.0, size=(2, SMALLEST_IMAGE_SIZE, SMALLEST_IMAGE_SIZE, 3))
    assert_forward_pass_gives_softmax(_builder(name), images, num_classes=7)


@pytest.mark.parametrize("name", ["mobilenet_v2_035", "mobilenet_v3_small"])
def test_zero_classes_returns_pooled_features_without_classifier(name: str) -> None:
    feature_depth = [
        shape[-2]
        for var_name, shape, _ in load_reference()[name]["model_variables"]
        if var_name.endswith("/weights") and "/Logits/" in var_name
    ][0]
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, SMALLEST_IMAGE_SIZE, SMALLEST_IMAGE_SIZE, 3])
        features, end_points = _builder(name)(images, 0)
        variable_names = [v.op.name for v in tf.compat.v1.global_variables()]
    assert features.shape.as_list() == [2, 1, 1, feature_depth]
    assert "Logits" not in end_points and "Predictions" not in end_points
    assert not [n for n in variable_names if "/Logits/" in n]


def test_weight_decay_applies_to_regular_convolutions_but_not_depthwise_kernels() -> None:
    name = "mobilenet_v3_small"
    variables = load_reference()[name]["model_variables"]
    conv_scopes = [n.rsplit("/", 1)[0] for n, _, _ in variables if n.endswith("/weights")]
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, SMALLEST_IMAGE_SIZE, SMALLEST_IMAGE_SIZE, 3])
        with slim.arg_scope(mobilenet_v3.training_scope(weight_decay=1e-4)):
            mobilenet_v3.small(images)
        losses = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
    # Each loss is named <layer scope>/<kernel kind>/Regularizer/...; depthwise kernels would be "depthwise_kernel".
    regularized = [loss.op.name.split("/Regularizer")[0].rsplit("/", 1) for loss in losses]
    assert sorted(scope for scope, _ in regularized) == sorted(conv_scopes)
    assert {kind for _, kind in regularized} == {"kernel"}


def test_reuse_builds_a_second_tower_without_new_variables() -> None:
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, SMALLEST_IMAGE_SIZE, SMALLEST_IMAGE_SIZE, 3])
        mobilenet_v3.small(images, num_classes=5)
        count = len(tf.compat.v1.global_variables())
        mobilenet_v3.small(images, num_classes=5, reuse=True)
        assert len(tf.compat.v1.global_variables()) == count


def _relu6_plus_3(values: np.ndarray) -> np.ndarray:
    return np.clip(values + np.float32(3.0), np.float32(0.0), np.float32(6.0))


def test_hard_swish_uses_exactly_one_sixth_in_the_official_order() -> None:
    values = np.linspace(-5.0, 5.0, 101, dtype=np.float32)
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        swish = session.run(mobilenet_v3.hard_swish(x=tf.constant(values)))
    # The official order, (x * relu6(x + 3)) * (1/6), to the bit.
    np.testing.assert_array_equal(swish, (values * _relu6_plus_3(values)) * ONE_SIXTH)


@pytest.mark.parametrize("saturate", [False, True], ids=["random-gate", "saturated-gate"])
def test_squeeze_excite_matches_float32_reference(saturate: bool) -> None:
    """The block's output against NumPy; a saturated gate (bias 10) scales every input by 6 * 0.16667."""
    inputs = np.random.default_rng(1).normal(size=(2, 4, 4, 24)).astype(np.float32)
    with tf.Graph().as_default():
        with slim.arg_scope([slim.conv2d], biases_initializer=tf.compat.v1.random_normal_initializer(seed=3)):
            output = mobilenet_v3.squeeze_excite(tf.constant(inputs))
        variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            if saturate:
                gate_biases = variables["squeeze_excite/Conv_1/biases"]
                session.run(gate_biases.assign(tf.fill(tf.shape(gate_biases), 10.0)))
            weights = session.run(variables)
            actual = session.run(output)
    assert weights["squeeze_excite/Conv/weights"].shape == (1, 1, 24, 8)  # 24 / 4 rounded up to a multiple of 8
    pooled = inputs.mean(axis=(1, 2))
    squeeze = "squeeze_excite/Conv/"
    excite = "squeeze_excite/Conv_1/"
    hidden = np.maximum(pooled @ weights[squeeze + "weights"][0, 0] + weights[squeeze + "biases"], 0.0)
    gate_logits = hidden @ weights[excite + "weights"][0, 0] + weights[excite + "biases"]
    expected = inputs * (_relu6_plus_3(gate_logits) * OFFICIAL_GATE_SCALE)[:, None, None, :]
    np.testing.assert_allclose(actual, expected, rtol=GATE_RTOL, atol=GATE_RTOL)
    if saturate:
        assert (gate_logits >= 3.0).all()  # setup guard: the gate sits on its upper flat part
        np.testing.assert_allclose(actual, inputs * (np.float32(6.0) * OFFICIAL_GATE_SCALE), rtol=GATE_RTOL, atol=0)
        assert not np.allclose(actual, inputs, rtol=GATE_RTOL, atol=GATE_RTOL)  # what an exact 1/6 would give


def _hard_sigmoid_scales(name: str) -> Dict[str, list]:
    """The scalar constant of every ``relu6(...) * constant`` in the graph of network ``name``.

    Keyed ``"gate"`` for squeeze-excite gates (scope ``.../squeeze_excite/Conv_1``) and ``"other"`` for the rest
    (the hard-swish activations).
    """
    scales: Dict[str, list] = {"gate": [], "other": []}
    with tf.Graph().as_default() as graph:
        images = tf.compat.v1.placeholder(tf.float32, [1, SMALLEST_IMAGE_SIZE, SMALLEST_IMAGE_SIZE, 3])
        _builder(name)(images, 5)
    for op in graph.get_operations():
        operand_types = [operand.op.type for operand in op.inputs]
        if op.type != "Mul" or sorted(operand_types) != ["Const", "Relu6"]:
            continue
        constant = op.inputs[operand_types.index("Const")].op
        key = "gate" if "/squeeze_excite/Conv_1/" in op.name else "other"
        scales[key].append(tf.make_ndarray(constant.get_attr("value")).item())
    return scales


# Minimalistic stands for the variants without squeeze-excite (EdgeTPU has none either, but is slower to build).
# Large gates with the same block code as small: its graph, the slowest of the three, waits for the slow tests.
@pytest.mark.parametrize("name", ["mobilenet_v3_small", pytest.param("mobilenet_v3_large", marks=pytest.mark.slow),
                                  "mobilenet_v3_small_minimalistic"])
def test_network_graph_gates_every_squeeze_excite_with_the_official_constant(name: str) -> None:
    blocks = [
        var_name
        for var_name, _, _ in load_reference()[name]["model_variables"]
        if var_name.endswith("/squeeze_excite/Conv_1/weights")
    ]
    scales = _hard_sigmoid_scales(name)
    assert scales["gate"] == [OFFICIAL_GATE_SCALE] * len(blocks)
    assert set(scales["other"]) <= {ONE_SIXTH}  # hard-swish keeps exactly 1/6


@pytest.mark.parametrize("residual", [True, False])
def test_expanded_conv_adds_its_input_only_when_residual(residual: bool) -> None:
    """With a zero projection the block's output is exactly its input (residual) or zero (no residual)."""
    inputs = np.random.default_rng(2).normal(size=(2, 6, 6, 16)).astype(np.float32)
    taps: Dict[str, tf.Tensor] = {}
    with tf.Graph().as_default():
        output = conv_blocks.expanded_conv(tf.constant(inputs), 16, residual=residual, endpoints=taps, scope="block")
        project = [v for v in tf.compat.v1.global_variables() if v.op.name == "block/project/weights"][0]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(project.assign(tf.zeros_like(project)))
            actual = session.run(output)
    assert sorted(taps) == ["depthwise_output", "expansion_output", "projection_output"]
    np.testing.assert_allclose(actual, inputs if residual else np.zeros_like(inputs), atol=FLOAT32_TOLERANCE)


def _build_error(**kwargs) -> str:
    images_shape = kwargs.pop("images_shape", [1, SMALLEST_IMAGE_SIZE, SMALLEST_IMAGE_SIZE, 3])
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, images_shape)
        with pytest.raises(ValueError) as error:
            mobilenet_v2.mobilenet(images, **kwargs)
    return str(error.value)


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"depth_multiplier": 0.0}, "multiplier"),
        ({"multiplier": 0.5}, "depth_multiplier"),
        ({"output_stride": 3}, "Output stride"),
        ({"images_shape": [SMALLEST_IMAGE_SIZE, SMALLEST_IMAGE_SIZE, 3]}, "rank 4"),
    ],
)
def test_bad_arguments_are_rejected_with_the_argument_named(kwargs: dict, argument: str) -> None:
    assert argument in _build_error(**kwargs)
