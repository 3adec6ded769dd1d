"""The public API of ``nets.resnet_utils``, ``nets.resnet_v1`` and ``nets.resnet_v2`` (official TF-Slim ResNets).

Here: each factory name builds exactly the official variables and end points (nothing extra); the
logits equal tf_slim's own ResNet definitions on shared variables; the generator arguments
(``global_pool``, ``output_stride``, ``num_classes=None``, ``spatial_squeeze``,
``include_root_block``, ``store_non_strided_activations``, ``is_training=None``, ``reuse``,
``depth_multiplier``/``min_base_depth``) behave as documented; atrous feature extraction at a finer
output stride, subsampled, equals the nominal-stride result.
"""

import functools

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from reference import assert_module_builds_official_outputs, load_reference
from tf_slim.nets import resnet_v1 as slim_resnet_v1
from tf_slim.nets import resnet_v2 as slim_resnet_v2

from nets import resnet_utils, resnet_v1, resnet_v2

NAMES = [f"resnet_v{version}_{depth}" for version in (1, 2) for depth in (50, 101, 152, 200)]
# Graph construction of the deeper ResNets takes tens of seconds on a small CPU (the 50-layer ones,
# with the same units, are checked by default).
SLOW_NAMES = {name for name in NAMES if not name.endswith("_50")}

# Outputs of the same float32 computation done two ways; only summation order may differ.
FLOAT32_TOLERANCE = 1e-5
# The atrous and the strided paths add up the same products in different orders through ~10 layers.
ATROUS_TOLERANCE = 1e-4

# Wide enough that the ReLUs do not silence a whole block (a 1-channel bottleneck often does).
# The strides are the 50-layer nets' (nominal output stride 32 with the root block); the output depth is 32.
TINY_UNITS = {"base_depth": (4, 4, 8, 8), "num_units": (2, 2, 2, 2), "stride": (2, 2, 2, 1)}
TINY_DEPTH = 4 * TINY_UNITS["base_depth"][-1]


def _module(name: str):
    return resnet_v1 if name.startswith("resnet_v1") else resnet_v2


def _tiny_blocks(block_fn) -> list:
    """Four thin blocks of two units, nominal stride 8 (without the root block)."""
    return [
        block_fn(f"block{index + 1}", base_depth=depth, num_units=units, stride=stride)
        for index, (depth, units, stride) in enumerate(zip(*TINY_UNITS.values()))
    ]


def _tiny_resnet(module, images: tf.Tensor, num_classes, **kwargs) -> tuple:
    """``module``'s generator (``resnet_v1.resnet_v1`` or ``resnet_v2.resnet_v2``) on the tiny blocks.

    The generator arguments go through the same code as in the 50-layer nets, whose builds take
    seconds each; the factory names themselves are checked against the official layout above.
    """
    generator, block_fn = ((resnet_v1.resnet_v1, resnet_v1.resnet_v1_block) if module is resnet_v1
                           else (resnet_v2.resnet_v2, resnet_v2.resnet_v2_block))
    return generator(images, _tiny_blocks(block_fn), num_classes, **kwargs)


def _normal_input(shape: list) -> tf.Tensor:
    """A fixed standard-normal input."""
    return tf.constant(np.random.RandomState(4).normal(size=shape), tf.float32)


def _run(fetches, feed=None):
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        return session.run(fetches, feed)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_NAMES else n for n in NAMES])
def test_factory_name_builds_exactly_the_official_outputs(name):
    module = _module(name)
    assert_module_builds_official_outputs(name, getattr(module, name), module.resnet_arg_scope, extra_end_points=())
    assert getattr(module, name).default_image_size == load_reference()[name]["default_image_size"]


@pytest.mark.parametrize(
    "ours, theirs, scope",
    [
        (resnet_v1.resnet_v1_50, slim_resnet_v1.resnet_v1_50, "resnet_v1_50"),
        (resnet_v2.resnet_v2_50, slim_resnet_v2.resnet_v2_50, "resnet_v2_50"),
    ],
)
def test_logits_equal_tf_slim_definition(ours, theirs, scope):
    """Sharing the variables (reuse), our logits equal tf_slim's (squeezed) and predictions are their softmax."""
    num_classes, shape = 5, [2, 64, 64, 3]
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, shape)
        with slim.arg_scope(resnet_utils.resnet_arg_scope()):
            logits, end_points = ours(images, num_classes=num_classes, is_training=False, scope=scope)
            reference, _ = theirs(images, num_classes=num_classes, is_training=False, reuse=True, scope=scope)
        batch = np.random.RandomState(0).uniform(-1.0, 1.0, shape).astype(np.float32)
        ours_value, reference_value, predictions = _run([logits, reference, end_points["predictions"]], {images: batch})
    assert ours_value.shape == (2, num_classes)
    np.testing.assert_allclose(ours_value, reference_value.reshape(2, num_classes), rtol=0, atol=FLOAT32_TOLERANCE)
    exp = np.exp(ours_value - ours_value.max(axis=1, keepdims=True))
    np.testing.assert_allclose(predictions, exp / exp.sum(axis=1, keepdims=True), atol=FLOAT32_TOLERANCE)


# resnet_v1_50 also trains by default, from an fp32 checkpoint, in tests/graph_pass/test_rewrite_official_nets.py.
@pytest.mark.parametrize("network", [pytest.param(resnet_v1.resnet_v1_50, marks=pytest.mark.slow),
                                     resnet_v2.resnet_v2_50])
def test_training_forward_pass_is_finite(network):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, 64, 64, 3])
        with slim.arg_scope(resnet_utils.resnet_arg_scope()):
            logits, _ = network(images, num_classes=7, is_training=True)
        value = _run(logits, {images: np.random.RandomState(1).uniform(-1, 1, [2, 64, 64, 3])})
    assert value.shape == (2, 7) and np.all(np.isfinite(value))


@pytest.mark.parametrize("module, num_classes", [(resnet_v1, None), (resnet_v2, 0)])
def test_no_classes_returns_pooled_features_without_logits(module, num_classes):
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, 64, 64, 3])
        features, end_points = _tiny_resnet(module, images, num_classes)
        variable_names = [v.op.name for v in tf.compat.v1.global_variables()]
    assert features is end_points["global_pool"]
    assert features.shape.as_list() == [2, 1, 1, TINY_DEPTH]
    assert "predictions" not in end_points and "Predictions" not in end_points
    assert not [name for name in variable_names if "logits" in name]


@pytest.mark.parametrize("output_stride, size", [(None, 3), (16, 5), (8, 9)])
def test_dense_features_have_the_requested_output_stride(output_stride, size):
    """Without global pooling a 65x65 input gives (65 - 1) / output_stride + 1 positions (nominal 32).

    (The arg_scope's 'SAME' pool1 is what aligns the corners; see ``resnet_arg_scope``.)
    """
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 65, 65, 3])
        with slim.arg_scope(resnet_utils.resnet_arg_scope()):
            features, end_points = _tiny_resnet(resnet_v1, images, None, global_pool=False, output_stride=output_stride)
    assert features.shape.as_list() == [1, size, size, TINY_DEPTH]
    assert "global_pool" not in end_points


def test_logits_without_spatial_squeeze_keep_their_spatial_dimensions():
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, 64, 64, 3])
        logits, end_points = _tiny_resnet(resnet_v2, images, 4, spatial_squeeze=False)
        dense_logits, _ = _tiny_resnet(resnet_v2, images, 4, global_pool=False, spatial_squeeze=False, scope="dense")
    assert logits.shape.as_list() == [2, 1, 1, 4]
    assert end_points["predictions"].shape.as_list() == [2, 1, 1, 4]
    assert "resnet_v2/logits" in end_points and "resnet_v2/spatial_squeeze" not in end_points
    assert dense_logits.shape.as_list() == [2, 2, 2, 4]


def test_depth_multiplier_scales_bottlenecks_with_a_floor():
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        resnet_v1.resnet_v1_50(images, num_classes=4, depth_multiplier=0.1, min_base_depth=16)
        weights = {v.op.name: v.shape.as_list() for v in tf.compat.v1.global_variables()}
    # block1 base depth 64 * 0.1 = 6 -> floor 16; block4 base depth 512 * 0.1 = 51.
    assert weights["resnet_v1_50/block1/unit_1/bottleneck_v1/conv1/weights"] == [1, 1, 64, 16]
    assert weights["resnet_v1_50/block4/unit_1/bottleneck_v1/conv1/weights"][-1] == 51
    assert weights["resnet_v1_50/block4/unit_3/bottleneck_v1/conv3/weights"][-1] == 51 * 4


@pytest.mark.parametrize(
    "network, bad_argument",
    [
        (resnet_v1.resnet_v1_50, {"depth_multiplier": -1.0}),
        (resnet_v1.resnet_v1_50, {"output_stride": 6}),
        (resnet_v2.resnet_v2_50, {"output_stride": 64}),
        (resnet_v2.resnet_v2_50, {"num_classes": -3}),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(network, bad_argument):
    argument = next(iter(bad_argument))
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        with pytest.raises(ValueError, match=argument):
            network(images, **bad_argument)


ATROUS_OUTPUT_STRIDES = (1, 2, 4)


@functools.lru_cache(maxsize=None)
def _atrous_and_nominal(block_fn) -> tuple:
    """``({output stride: (dense shape, dense value subsampled to stride 8)}, nominal value)`` on shared variables.

    One graph and one run for every output stride of ``block_fn``'s tiny blocks.
    """
    blocks = _tiny_blocks(block_fn)
    with tf.Graph().as_default():
        tf.compat.v1.set_random_seed(0)
        inputs = _normal_input([1, 30, 31, 3])
        with slim.arg_scope(resnet_utils.resnet_arg_scope()), slim.arg_scope([slim.batch_norm], is_training=False):
            nominal = resnet_utils.stack_blocks_dense(inputs, blocks)
            tf.compat.v1.get_variable_scope().reuse_variables()
            dense = {stride: resnet_utils.stack_blocks_dense(inputs, blocks, stride)
                     for stride in ATROUS_OUTPUT_STRIDES}
        subsampled = {stride: resnet_utils.subsample(tensor, 8 // stride) for stride, tensor in dense.items()}
        values, nominal_value = _run([subsampled, nominal])
    return {stride: (dense[stride].shape.as_list(), values[stride]) for stride in dense}, nominal_value


@pytest.mark.parametrize("block_fn", [resnet_v1.resnet_v1_block, resnet_v2.resnet_v2_block])
@pytest.mark.parametrize("output_stride", ATROUS_OUTPUT_STRIDES)
def test_atrous_blocks_subsampled_equal_the_nominal_stride_blocks(block_fn, output_stride):
    """stack_blocks_dense at a finer output stride, subsampled to the nominal 8, equals the strided result."""
    dense, nominal_value = _atrous_and_nominal(block_fn)
    dense_shape, dense_value = dense[output_stride]
    assert dense_shape[1:3] == [-(-30 // output_stride), -(-31 // output_stride)]
    assert nominal_value.shape == (1, 4, 4, 32)
    assert np.abs(nominal_value).max() > 0
    np.testing.assert_allclose(dense_value, nominal_value, rtol=ATROUS_TOLERANCE, atol=ATROUS_TOLERANCE)


def test_unreachable_output_stride_is_rejected():
    with tf.Graph().as_default():
        inputs = tf.compat.v1.placeholder(tf.float32, [1, 32, 32, 3])
        with pytest.raises(ValueError, match="output_stride"):
            resnet_utils.stack_blocks_dense(inputs, _tiny_blocks(resnet_v1.resnet_v1_block), output_stride=3)


def test_store_non_strided_activations_keeps_block_end_points_at_full_resolution():
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        with slim.arg_scope(resnet_utils.resnet_arg_scope()):
            features, end_points = _tiny_resnet(resnet_v1, images, None, global_pool=False)
            stored, stored_end_points = _tiny_resnet(
                resnet_v1, images, None, global_pool=False, store_non_strided_activations=True, scope="stored"
            )
    sizes = [end_points[f"resnet_v1/block{b}"].shape.as_list()[1] for b in (1, 2, 3, 4)]
    stored_sizes = [stored_end_points[f"stored/block{b}"].shape.as_list()[1] for b in (1, 2, 3, 4)]
    assert sizes == [8, 4, 2, 2]
    assert stored_sizes == [16, 8, 4, 2]
    assert features.shape.as_list() == stored.shape.as_list() == [1, 2, 2, TINY_DEPTH]


def test_conv2d_same_equals_stride_one_convolution_subsampled():
    """The documented identity: conv2d_same(x, stride=2) == subsample(conv2d(x, stride=1, 'SAME'), 2)."""
    with tf.Graph().as_default():
        inputs = tf.constant(np.random.RandomState(2).normal(size=(1, 6, 7, 2)), tf.float32)
        strided = resnet_utils.conv2d_same(inputs, 3, 3, stride=2, scope="conv")
        tf.compat.v1.get_variable_scope().reuse_variables()
        full = slim.conv2d(inputs, 3, [3, 3], stride=1, padding="SAME", scope="conv")
        strided_value, subsampled_value = _run([strided, resnet_utils.subsample(full, 2)])
    assert strided_value.shape == (1, 3, 4, 3)
    np.testing.assert_allclose(strided_value, subsampled_value, rtol=0, atol=FLOAT32_TOLERANCE)


def test_rootless_generator_starts_at_the_first_block():
    blocks = _tiny_blocks(resnet_v2.resnet_v2_block)
    with tf.Graph().as_default():
        inputs = tf.compat.v1.placeholder(tf.float32, [2, 32, 32, 3])
        with slim.arg_scope(resnet_utils.resnet_arg_scope()):
            logits, end_points = resnet_v2.resnet_v2(inputs, blocks, 3, include_root_block=False, scope="tiny")
        variable_names = [v.op.name for v in tf.compat.v1.global_variables()]
    assert end_points["tiny/block1"].shape.as_list() == [2, 16, 16, 16]
    assert logits.shape.as_list() == [2, 3]
    assert not [name for name in variable_names if name.startswith("tiny/conv1/")]
    assert "tiny/postnorm/gamma" in variable_names


@pytest.mark.parametrize("outer_is_training, expected", [(True, True), (False, False)])
def test_is_training_none_leaves_batch_norm_mode_to_the_enclosing_scope(outer_is_training, expected):
    """With is_training=None, batch norm follows an outer arg_scope: in training it normalises by batch statistics."""
    blocks = _tiny_blocks(resnet_v1.resnet_v1_block)
    batch = np.random.RandomState(3).uniform(0, 10, [4, 16, 16, 3]).astype(np.float32)
    with tf.Graph().as_default():
        inputs = tf.compat.v1.placeholder(tf.float32, batch.shape)
        with slim.arg_scope(resnet_utils.resnet_arg_scope()), slim.arg_scope(
            [slim.batch_norm], is_training=outer_is_training
        ):
            _, end_points = resnet_v1.resnet_v1(inputs, blocks, None, is_training=None, scope="tiny")
        # conv1's BN output (before ReLU) has zero batch mean in training mode, not with fresh statistics.
        normalised = [
            op.outputs[0] for op in tf.compat.v1.get_default_graph().get_operations()
            if op.name.startswith("tiny/conv1/BatchNorm/") and op.type.startswith("FusedBatchNorm")
        ]
        assert len(normalised) == 1
        value = _run(normalised[0], {inputs: batch})
    batch_mean_is_zero = bool(np.allclose(value.mean(axis=(0, 1, 2)), 0.0, atol=1e-3))
    assert batch_mean_is_zero == expected
    assert "tiny/block4" in end_points


def test_reuse_shares_every_variable():
    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 64, 64, 3])
        _tiny_resnet(resnet_v2, images, 3, scope="tiny")
        count = len(tf.compat.v1.global_variables())
        _tiny_resnet(resnet_v2, images, 3, reuse=True, scope="tiny")
        assert len(tf.compat.v1.global_variables()) == count
