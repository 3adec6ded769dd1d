"""The official public API of the Inception modules: nets.inception, nets.inception_v1 .. v4,
nets.inception_resnet_v2 and nets.inception_utils, argument by argument, on small inputs
(the checks that build whole networks or run them are slow tests).

Shapes come from the papers' layer tables (e.g. Inception v1 halves the grid five times,
224 -> 7; without its stem it takes a 28x28x192 map to 7x7x1024), not from the code under test.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from nets import (
    inception,
    inception_resnet_v2,
    inception_utils,
    inception_v1,
    inception_v2,
    inception_v3,
    inception_v4,
)

FLOAT32_TOLERANCE = 1e-5
V1_STEM = ["Conv2d_1a_7x7", "MaxPool_2a_3x3", "Conv2d_2b_1x1", "Conv2d_2c_3x3", "MaxPool_3a_3x3"]


def _variable_shapes() -> dict:
    return {v.op.name: v.shape.as_list() for v in tf.compat.v1.global_variables()}


def _run(fetches, feed: dict = None):
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        return session.run(fetches, feed)


def _random(shape: list) -> np.ndarray:
    return np.random.RandomState(0).uniform(-1.0, 1.0, shape).astype(np.float32)


@pytest.mark.parametrize(
    "module, names",
    [
        (inception_v1, ["inception_v1", "inception_v1_base", "inception_v1_arg_scope"]),
        (inception_v2, ["inception_v2", "inception_v2_base", "inception_v2_arg_scope"]),
        (inception_v3, ["inception_v3", "inception_v3_base", "inception_v3_arg_scope"]),
        (inception_v4, ["inception_v4", "inception_v4_base", "inception_v4_arg_scope"]),
        (inception_resnet_v2, ["inception_resnet_v2", "inception_resnet_v2_base", "inception_resnet_v2_arg_scope"]),
    ],
)
def test_nets_inception_re_exports_every_version(module, names):
    assert all(getattr(inception, name) is getattr(module, name) for name in names)


@pytest.mark.parametrize("module", [inception_v1, inception_v2, inception_v3, inception_v4])
def test_versions_share_the_inception_arg_scope(module):
    version = module.__name__.split(".")[-1]
    assert getattr(module, f"{version}_arg_scope") is inception_utils.inception_arg_scope


@pytest.mark.parametrize("batch_norm_scale", [False, True])
def test_batch_norm_scale_adds_gamma_to_every_batch_norm(batch_norm_scale):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        with slim.arg_scope(inception_utils.inception_arg_scope(batch_norm_scale=batch_norm_scale)):
            inception_v1.inception_v1_base(images, final_endpoint="Mixed_3b")
        names = set(_variable_shapes())
    means = [name for name in names if name.endswith("BatchNorm/moving_mean")]
    gammas = [name for name in names if name.endswith("BatchNorm/gamma")]
    assert len(means) == 1 + 1 + 1 + 6  # three stem convolutions, six in Mixed_3b
    expected_gammas = sorted(name.replace("moving_mean", "gamma") for name in means) if batch_norm_scale else []
    assert sorted(gammas) == expected_gammas


def test_without_batch_norm_convolutions_get_biases():
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        with slim.arg_scope(inception_utils.inception_arg_scope(use_batch_norm=False)):
            inception_v1.inception_v1_base(images, final_endpoint="Conv2d_2b_1x1")
        names = set(_variable_shapes())
    convolutions = ("Conv2d_1a_7x7", "Conv2d_2b_1x1")
    assert names == {f"InceptionV1/{conv}/{kind}" for conv in convolutions for kind in ("weights", "biases")}


@pytest.mark.parametrize("base_fn", [inception_v1.inception_v1_base, inception_v2.inception_v2_base])
def test_without_root_block_the_trunk_starts_at_mixed_3b(base_fn):
    with tf.Graph().as_default():
        features = tf.compat.v1.placeholder(tf.float32, [2, 28, 28, 192])
        net, end_points = base_fn(features, include_root_block=False)
    assert net.shape.as_list() == [2, 7, 7, 1024]
    assert list(end_points)[0] == "Mixed_3b" and not set(V1_STEM) & set(end_points)


@pytest.mark.slow
def test_v1_without_root_block_continues_the_full_trunk():
    """Fed the stem's output and sharing the variables, the stem-less trunk computes the full trunk's Mixed_5c."""
    shape = [1, 64, 64, 3]
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, shape)
        full, end_points = inception_v1.inception_v1_base(images)
        with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(), reuse=True):
            rest, _ = inception_v1.inception_v1_base(end_points["MaxPool_3a_3x3"], include_root_block=False)
        full_value, rest_value = _run([full, rest], {images: _random(shape)})
    np.testing.assert_allclose(rest_value, full_value, rtol=0, atol=FLOAT32_TOLERANCE)


@pytest.mark.parametrize("base_fn", [inception_v1.inception_v1_base, inception_v2.inception_v2_base])
def test_a_stem_end_point_is_unknown_without_the_root_block(base_fn):
    with tf.Graph().as_default():
        features = tf.compat.v1.placeholder(tf.float32, [1, 28, 28, 192])
        with pytest.raises(ValueError, match="final_endpoint"):
            base_fn(features, final_endpoint="Conv2d_2c_3x3", include_root_block=False)


@pytest.mark.parametrize(
    "base_fn, final_endpoint, shape",
    [
        (inception_v1.inception_v1_base, "Mixed_4c", [1, 4, 4, 512]),
        (inception_v2.inception_v2_base, "Mixed_4a", [1, 4, 4, 576]),
        (inception_v4.inception_v4_base, "Mixed_5a", [1, 7, 7, 384]),
        (inception_resnet_v2.inception_resnet_v2_base, "Mixed_5b", [1, 7, 7, 320]),
    ],
)
def test_final_endpoint_stops_the_trunk(base_fn, final_endpoint, shape):
    size = 64 if "Mixed_4" in final_endpoint else 75
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, size, size, 3])
        net, end_points = base_fn(images, final_endpoint=final_endpoint)
    assert list(end_points)[-1] == final_endpoint
    assert end_points[final_endpoint] is net and net.shape.as_list() == shape


def test_v2_plain_stem_convolution_replaces_the_separable_one():
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        separable, _ = inception_v2.inception_v2_base(images, final_endpoint="Conv2d_1a_7x7")
        plain, _ = inception_v2.inception_v2_base(
            images, final_endpoint="Conv2d_1a_7x7", use_separable_conv=False, scope="Plain"
        )
        shapes = _variable_shapes()
    assert separable.shape.as_list() == plain.shape.as_list() == [1, 32, 32, 64]
    # depthwise multiplier min(64 // 3, 8) = 8 per input channel, then a 1x1 to 64.
    assert shapes["InceptionV2/Conv2d_1a_7x7/depthwise_weights"] == [7, 7, 3, 8]
    assert shapes["InceptionV2/Conv2d_1a_7x7/pointwise_weights"] == [1, 1, 24, 64]
    assert shapes["Plain/Conv2d_1a_7x7/weights"] == [7, 7, 3, 64]


@pytest.mark.slow
def test_v2_nchw_end_points_are_the_transposed_nhwc_ones():
    with tf.Graph().as_default():
        channels_last = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        channels_first = tf.compat.v1.placeholder(tf.float32, [1, 3, 64, 64])
        _, nhwc = inception_v2.inception_v2_base(channels_last, use_separable_conv=False)
        _, nchw = inception_v2.inception_v2_base(
            channels_first, use_separable_conv=False, data_format="NCHW", scope="NCHW"
        )
    assert list(nchw) == list(nhwc)
    for name, tensor in nhwc.items():
        batch, height, width, channels = tensor.shape.as_list()
        assert nchw[name].shape.as_list() == [batch, channels, height, width], name


@pytest.mark.parametrize(
    "kwargs, message",
    [({"data_format": "NCWH"}, "data_format"), ({"data_format": "NCHW"}, "use_separable_conv")],
)
def test_v2_rejects_unusable_data_formats(kwargs, message):
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=message):
            inception_v2.inception_v2_base(tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3]), **kwargs)


# Mixed_5c's branches are 352 + 320 + 224 + 128 channels at full width; at 0.1 they become
# 35 + 32 + 22 + 12, the last raised to min_depth 16.
@pytest.mark.parametrize("depth_multiplier, stem, mixed_5c", [(0.5, 32, 512), (0.1, 16, 35 + 32 + 22 + 16)])
def test_v2_depth_multiplier_scales_every_layer_down_to_min_depth(depth_multiplier, stem, mixed_5c):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        _, end_points = inception_v2.inception_v2_base(images, depth_multiplier=depth_multiplier, min_depth=16)
    assert end_points["Conv2d_1a_7x7"].shape[-1] == stem
    assert end_points["Mixed_5c"].shape[-1] == mixed_5c


@pytest.mark.slow
@pytest.mark.parametrize(
    "network, pooled",
    [(inception_v1.inception_v1, "AvgPool_0a_7x7"), (inception_v2.inception_v2, "AvgPool_1a")],
)
def test_global_pool_equals_the_fixed_window_at_the_default_size(network, pooled):
    """At 224x224 the last grid is 7x7, so the 7x7 window and the global average pool coincide."""
    shape = [1, 224, 224, 3]
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, shape)
        window, window_end_points = network(images, num_classes=4, is_training=False)
        global_logits, global_end_points = network(
            images, num_classes=4, is_training=False, global_pool=True, reuse=True
        )
        values = _run([window, global_logits], {images: _random(shape)})
    assert pooled in window_end_points and "global_pool" in global_end_points
    np.testing.assert_allclose(values[1], values[0], rtol=0, atol=FLOAT32_TOLERANCE)


@pytest.mark.slow
@pytest.mark.parametrize(
    "network, size, pre_logits",
    [
        (inception_v1.inception_v1, 64, False),
        (inception_v2.inception_v2, 64, True),
        (inception_v3.inception_v3, 107, True),
    ],
)
def test_unsqueezed_logits_and_pre_logits_end_point(network, size, pre_logits):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, size, size, 3])
        logits, end_points = network(images, num_classes=6, spatial_squeeze=False)
    assert logits.shape.as_list() == [2, 1, 1, 6]
    assert ("PreLogits" in end_points) == pre_logits


@pytest.mark.slow
@pytest.mark.parametrize("num_classes, create_aux_logits", [(5, False), (None, True), (0, True)])
def test_v3_auxiliary_head_needs_classes_and_the_flag(num_classes, create_aux_logits):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 107, 107, 3])
        inception_v3.inception_v3(images, num_classes=num_classes, create_aux_logits=create_aux_logits)
        scopes = {name.split("/")[1] for name in _variable_shapes()}
    assert "AuxLogits" not in scopes


@pytest.mark.parametrize(
    "block, default_scope, channels, grid, out_grid",
    [
        (inception_v4.block_inception_a, "BlockInceptionA", 384, 9, 9),
        (inception_v4.block_reduction_a, "BlockReductionA", 384 + 256 + 64, 9, 4),
        (inception_v4.block_inception_b, "BlockInceptionB", 1024, 9, 9),
        (inception_v4.block_reduction_b, "BlockReductionB", 192 + 320 + 64, 9, 4),
        (inception_v4.block_inception_c, "BlockInceptionC", 1536, 5, 5),
    ],
)
def test_v4_blocks_stand_alone_with_their_default_scope_and_reuse(block, default_scope, channels, grid, out_grid):
    """Inception blocks keep the grid (stride-1 SAME by default); reductions halve it with VALID 3x3/2 layers."""
    with tf.Graph().as_default():
        net = tf.compat.v1.placeholder(tf.float32, [1, grid, grid, 64])
        with slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d], stride=2, padding="VALID"):
            output = block(net)
        count = len(tf.compat.v1.global_variables())
        block(net, scope=default_scope, reuse=True)
        names = list(_variable_shapes())
    assert output.shape.as_list() == [1, out_grid, out_grid, channels]
    assert len(names) == count and all(name.startswith(default_scope + "/") for name in names)
