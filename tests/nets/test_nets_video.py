"""I3D and S3D-G: official layout, end points, a forward pass on a short clip, the public base functions
and the 3-D blocks of nets.i3d_utils."""

from typing import Callable

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from nets.i3d import i3d, i3d_arg_scope, i3d_base
from nets.i3d_utils import center_initializer, conv3d_spatiotemporal, inception_block_v1_3d, reduced_kernel_size_3d
from nets.s3dg import s3dg, s3dg_arg_scope, s3dg_base, self_gating
from nets_checks import Build, assert_forward_pass_gives_softmax, builder
from reference import assert_module_builds_official_outputs, load_reference

NETWORKS = {"i3d": (i3d, i3d_arg_scope), "s3dg": (s3dg, s3dg_arg_scope)}
# Smallest clip that survives the 8x temporal and 32x spatial downsampling.
SMALL_CLIP_SHAPE = (2, 8, 32, 32, 3)
FLOAT32_TOLERANCE = 1e-5


def _builder(name: str, **kwargs) -> Build:
    network_fn, arg_scope_fn = NETWORKS[name]
    return builder(network_fn, arg_scope_fn, **kwargs)


def _variable_names(build: Callable[[tf.Tensor, int], tuple], shape=SMALL_CLIP_SHAPE) -> list:
    """Build in a fresh graph and return the names of all global variables."""
    with tf.Graph().as_default():
        build(tf.compat.v1.placeholder(tf.float32, shape), 10)
        return [v.op.name for v in tf.compat.v1.global_variables()]


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_variables_and_end_points_match_official(name: str) -> None:
    assert_module_builds_official_outputs(name, *NETWORKS[name])


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_default_image_size_is_official(name: str) -> None:
    network_fn, _ = NETWORKS[name]
    assert network_fn.default_image_size == load_reference()[name]["default_image_size"]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_forward_pass_on_short_clip_gives_finite_logits_and_softmax(name: str) -> None:
    clip = np.random.default_rng(0).uniform(-1.0, 1.0, size=SMALL_CLIP_SHAPE).astype(np.float32)
    assert_forward_pass_gives_softmax(_builder(name), clip, num_classes=6)


def test_self_gate_matches_numpy_reference() -> None:
    rng = np.random.default_rng(1)
    features = rng.normal(size=(2, 3, 4, 4, 5)).astype(np.float32)
    with tf.Graph().as_default():
        gated = self_gating(tf.constant(features), "block")
        (kernel,) = tf.compat.v1.global_variables()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            gated_value, kernel_value = session.run([gated, kernel])
    assert kernel.op.name == "block/self_gating/transformer_W/weights"
    context = features.astype(np.float64).mean(axis=(1, 2, 3))
    gates = 1.0 / (1.0 + np.exp(-context @ kernel_value.reshape(5, 5)))
    expected = features * gates[:, None, None, None, :]
    np.testing.assert_allclose(gated_value, expected, atol=FLOAT32_TOLERANCE)


def test_center_initializer_puts_identity_on_middle_tap() -> None:
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        kernel = session.run(center_initializer()([3, 1, 1, 4, 4]))
    expected = np.zeros((3, 1, 1, 4, 4), np.float32)
    expected[1, 0, 0] = np.eye(4)
    np.testing.assert_array_equal(kernel, expected)


@pytest.mark.parametrize("shape", [[2, 1, 1, 4, 4], [3, 1, 1, 4, 5], [3, 3, 1, 4, 4], [3, 4, 4]])
def test_center_initializer_rejects_other_shapes(shape: list) -> None:
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="kernel shape"):
            center_initializer()(shape)


def test_separable_conv_starts_as_its_spatial_half() -> None:
    """The temporal half is initialized to the identity, so the block initially equals its 1x3x3 convolution."""
    clip = np.random.default_rng(2).normal(size=(1, 5, 6, 6, 4)).astype(np.float32)
    with tf.Graph().as_default() as graph:
        output = conv3d_spatiotemporal(
            tf.constant(clip), 8, [3, 3, 3], activation_fn=tf.nn.relu, separable=True, scope="block"
        )
        spatial = graph.get_tensor_by_name("block/Relu:0")
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            output_value, spatial_value = session.run([output, spatial])
        shapes = {v.op.name: v.shape.as_list() for v in tf.compat.v1.global_variables()}
    assert shapes["block/weights"] == [1, 3, 3, 4, 8]
    assert shapes["block/temporal/weights"] == [3, 1, 1, 8, 8]
    np.testing.assert_allclose(output_value, spatial_value, atol=FLOAT32_TOLERANCE)


def test_i3d_arg_scope_can_make_i3d_separable() -> None:
    def build(clips: tf.Tensor, num_classes: int) -> tuple:
        with slim.arg_scope(i3d_arg_scope(separable_conv3d=True)):
            return i3d(clips, num_classes=num_classes)

    names = _variable_names(build)
    assert "InceptionV1/Mixed_3b/Branch_1/Conv2d_0b_3x3/temporal/weights" in names
    assert not any("self_gating" in name for name in names)


def test_s3dg_start_blocks_switch_features_on_from_that_block() -> None:
    build = _builder("s3dg", temporal_conv_startat=None, gating_startat="Mixed_4b", final_endpoint="Mixed_4d")
    names = _variable_names(build)
    assert not any("/temporal/" in name for name in names)
    gated_blocks = sorted({name.split("/")[1] for name in names if "self_gating" in name})
    assert gated_blocks == ["Mixed_4b", "Mixed_4c", "Mixed_4d"]


def test_s3dg_depth_multiplier_scales_every_branch_down_to_min_depth() -> None:
    with tf.Graph().as_default():
        clips = tf.compat.v1.placeholder(tf.float32, SMALL_CLIP_SHAPE)
        with slim.arg_scope(s3dg_arg_scope()):
            _, end_points = s3dg(clips, num_classes=10, depth_multiplier=0.5, final_endpoint="Mixed_3b")
        shapes = {v.op.name: v.shape.as_list() for v in tf.compat.v1.global_variables()}
    # Mixed_3b branches are 64 + 128 + 32 + 32 channels at full width.
    assert end_points["Mixed_3b"].shape.as_list()[-1] == (64 + 128 + 32 + 32) // 2
    # Its 16-channel reduction would shrink to 8 but min_depth keeps 16; its input is Conv2d_2c_3x3 (192 / 2).
    assert shapes["InceptionV1/Mixed_3b/Branch_2/Conv2d_0a_1x1/weights"] == [1, 1, 1, 96, 16]


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"first_temporal_kernel_size": 4}, "first_temporal_kernel_size"),
        ({"temporal_conv_startat": "Mixed_9z"}, "temporal_conv_startat"),
        ({"gating_startat": "MaxPool_4a_3x3"}, "gating_startat"),
        ({"final_endpoint": "Logits"}, "final_endpoint"),
        ({"depth_multiplier": -1.0}, "depth_multiplier"),
    ],
)
def test_bad_s3dg_options_are_named_in_the_error(kwargs: dict, argument: str) -> None:
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=argument):
            _builder("s3dg", **kwargs)(tf.compat.v1.placeholder(tf.float32, SMALL_CLIP_SHAPE), 10)


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_image_batch_is_rejected(name: str) -> None:
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="inputs must be a 5-D"):
            _builder(name)(tf.compat.v1.placeholder(tf.float32, [2, 32, 32, 3]), 10)


def test_s3dg_base_channels_first_end_points_are_the_transposed_channels_last_ones() -> None:
    clip_shape = [1, 8, 32, 32, 3]
    with tf.Graph().as_default():
        _, ndhwc = s3dg_base(tf.compat.v1.placeholder(tf.float32, clip_shape), final_endpoint="Mixed_3b")
        channels_first = [clip_shape[0], clip_shape[4], *clip_shape[1:4]]
        _, ncdhw = s3dg_base(
            tf.compat.v1.placeholder(tf.float32, channels_first),
            final_endpoint="Mixed_3b",
            data_format="NCDHW",
            scope="ChannelsFirst",
        )
    assert list(ncdhw) == list(ndhwc)
    for name, tensor in ndhwc.items():
        batch, frames, height, width, channels = tensor.shape.as_list()
        assert ncdhw[name].shape.as_list() == [batch, channels, frames, height, width], name


def test_s3dg_rejects_an_unknown_data_format() -> None:
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="data_format"):
            s3dg_base(tf.compat.v1.placeholder(tf.float32, SMALL_CLIP_SHAPE), data_format="NHWC")


def test_i3d_base_stops_at_final_endpoint_with_a_7_frame_stem() -> None:
    with tf.Graph().as_default():
        clips = tf.compat.v1.placeholder(tf.float32, SMALL_CLIP_SHAPE)
        net, end_points = i3d_base(clips, final_endpoint="Conv2d_2c_3x3")
        shapes = {v.op.name: v.shape.as_list() for v in tf.compat.v1.global_variables()}
    assert list(end_points)[-1] == "Conv2d_2c_3x3" and net is end_points["Conv2d_2c_3x3"]
    assert shapes["InceptionV1/Conv2d_1a_7x7/weights"] == [7, 7, 7, 3, 64]
    assert shapes["InceptionV1/Conv2d_2c_3x3/weights"] == [3, 3, 3, 64, 192]


def test_inception_block_v1_3d_concatenates_its_branches_and_gates_each() -> None:
    gated_scopes = []

    def record_gate(net: tf.Tensor, scope: str) -> tf.Tensor:
        gated_scopes.append(scope)
        return net

    # Like the official block, its max pool takes stride and padding from the caller's arg_scope.
    with tf.Graph().as_default(), slim.arg_scope([slim.max_pool3d], stride=1, padding="SAME"):
        clips = tf.compat.v1.placeholder(tf.float32, [1, 4, 8, 8, 16])
        output = inception_block_v1_3d(clips, 3, 4, 5, 6, 7, 8, self_gating_fn=record_gate, scope="Mixed")
    assert output.shape.as_list() == [1, 4, 8, 8, 3 + 5 + 7 + 8]
    assert gated_scopes == ["Conv2d_0a_1x1", "Conv2d_0b_3x3", "Conv2d_0b_3x3", "Conv2d_0b_1x1"]


@pytest.mark.parametrize(
    ("shape", "expected"), [([1, 1, 4, 9, 3], [1, 4, 7]), ([1, 8, 8, 8, 3], [2, 7, 7]), ([1, None, 4, 4, 3], [2, 7, 7])]
)
def test_reduced_kernel_size_3d_shrinks_to_a_known_smaller_map(shape: list, expected: list) -> None:
    with tf.Graph().as_default():
        assert reduced_kernel_size_3d(tf.compat.v1.placeholder(tf.float32, shape), [2, 7, 7]) == expected


def test_separable_conv3d_splits_the_stride_between_its_halves() -> None:
    with tf.Graph().as_default():
        clips = tf.compat.v1.placeholder(tf.float32, [1, 8, 16, 16, 4])
        output = conv3d_spatiotemporal(clips, 6, [3, 3, 3], stride=2, separable=True, scope="conv")
        shapes = {v.op.name: v.shape.as_list() for v in tf.compat.v1.global_variables()}
    assert output.shape.as_list() == [1, 4, 8, 8, 6]
    assert shapes["conv/weights"] == [1, 3, 3, 4, 6] and shapes["conv/temporal/weights"] == [3, 1, 1, 6, 6]


def test_center_initializer_rejects_integer_kernels() -> None:
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="float32"):
            center_initializer()([3, 1, 1, 4, 4], dtype=tf.int32)
