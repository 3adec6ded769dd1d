"""The official MobileNet API as users call it: conv-def edits, arg scopes, body options, pooling, v1 options.

Small inputs and truncated conv defs keep every build quick; the full networks' variables and
end points are checked against the official tables in ``test_nets_mobilenet_*.py``.
"""

import copy
import importlib
from typing import Dict, List

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from nets import mobilenet_v1
from nets.mobilenet import conv_blocks, mobilenet_v2, mobilenet_v3
from nets.mobilenet import mobilenet as lib

OFFICIAL_MODULES = [
    "nets.mobilenet_v1",
    "nets.mobilenet.conv_blocks",
    "nets.mobilenet.mobilenet",
    "nets.mobilenet.mobilenet_v2",
    "nets.mobilenet.mobilenet_v3",
]
# One float32 rounding per summed element, relative to values of order 1.
POOL_TOLERANCE = 1e-6


def _placeholder(size: int = 32, channels: int = 3, batch: int = 1) -> tf.Tensor:
    return tf.compat.v1.placeholder(tf.float32, [batch, size, size, channels])


def _first_layers(conv_defs: dict, count: int) -> dict:
    """A deep copy of ``conv_defs`` keeping only its first ``count`` layers."""
    truncated = copy.deepcopy(conv_defs)
    truncated["spec"] = truncated["spec"][:count]
    return truncated


def _conv2d_depths(graph: tf.Graph) -> List[int]:
    return [op.outputs[0].shape.as_list()[-1] for op in graph.get_operations() if op.type == "Conv2D"]


def _op_types(graph: tf.Graph) -> set:
    return {op.type for op in graph.get_operations()}


@pytest.mark.parametrize("module", OFFICIAL_MODULES)
def test_every_official_module_path_imports(module: str) -> None:
    assert importlib.import_module(module).__name__ == module


def test_edited_copy_of_v2_def_builds_the_edit_and_leaves_v2_def_alone() -> None:
    edited = _first_layers(mobilenet_v2.V2_DEF, 3)
    edited["spec"][0] = lib.op(slim.conv2d, stride=2, num_outputs=24, kernel_size=[3, 3])
    edited["defaults"][(slim.conv2d, slim.fully_connected, slim.separable_conv2d)]["activation_fn"] = tf.nn.relu
    with tf.Graph().as_default() as graph:
        net, end_points = lib.mobilenet_base(_placeholder(), conv_defs=edited)
    # Stem 24; block 1 projects to 16 (no expansion at factor 1); block 2 expands 16 * 6 and projects to 24.
    assert _conv2d_depths(graph) == [24, 16, 96, 24]
    assert "Relu" in _op_types(graph) and "Relu6" not in _op_types(graph)
    assert sorted(key for key in end_points if "/" not in key) == ["layer_1", "layer_2", "layer_3"]
    assert net is end_points["layer_3"]
    assert len(mobilenet_v2.V2_DEF["spec"]) == 19
    assert mobilenet_v2.V2_DEF["spec"][0].params["num_outputs"] == 32


def test_overrides_split_the_expansion_into_groups() -> None:
    split = _first_layers(mobilenet_v2.V2_DEF, 3)
    split["overrides"] = {(conv_blocks.expanded_conv,): {"split_expansion": 2}}
    with tf.Graph().as_default() as graph:
        _, end_points = lib.mobilenet_base(_placeholder(), conv_defs=split)
    assert _conv2d_depths(graph) == [32, 16, 48, 48, 24]
    assert {"layer_3/expand_part_0_output", "layer_3/expand_part_1_output"} <= set(end_points)


def test_multiplier_func_of_an_op_replaces_depth_scaling() -> None:
    def keep_depth(params: dict, multiplier: float) -> None:
        del params, multiplier

    conv_defs = _first_layers(mobilenet_v2.V2_DEF, 2)
    conv_defs["spec"][0] = lib.op(slim.conv2d, multiplier_func=keep_depth, stride=2, num_outputs=32, kernel_size=3)
    with tf.Graph().as_default() as graph:
        lib.mobilenet_base(_placeholder(), conv_defs=conv_defs, multiplier=0.5)
    assert _conv2d_depths(graph) == [32, 8]  # the second layer: 16 * 0.5 rounded up to min_depth 8


def test_depth_multiplier_arg_scope_sets_min_depth_and_divisor() -> None:
    with tf.Graph().as_default() as graph:
        with slim.arg_scope([lib.depth_multiplier], min_depth=32, divisible_by=16):
            lib.mobilenet_base(_placeholder(), conv_defs=_first_layers(mobilenet_v2.V2_DEF, 3), multiplier=0.1)
    assert _conv2d_depths(graph) == [32, 32, 192, 32]


@pytest.mark.parametrize(("output_stride", "expected_size"), [(None, 3), (4, 9), (2, 17)])
@pytest.mark.parametrize("use_explicit_padding", [False, True])
def test_output_stride_turns_late_strides_into_rates(output_stride, expected_size: int,
                                                     use_explicit_padding: bool) -> None:
    """33x33 (odd) input through the first 8 layers (total stride 16): SAME and explicit padding agree."""
    with tf.Graph().as_default() as graph:
        net, _ = lib.mobilenet_base(
            _placeholder(33), conv_defs=_first_layers(mobilenet_v2.V2_DEF, 8), output_stride=output_stride,
            use_explicit_padding=use_explicit_padding,
        )
    assert net.shape.as_list() == [1, expected_size, expected_size, 64]
    # slim's depthwise convolution dilates through space-to-batch.
    assert ("SpaceToBatchND" in _op_types(graph)) == (output_stride is not None)


def test_final_endpoint_stops_the_body() -> None:
    with tf.Graph().as_default():
        net, end_points = mobilenet_v3.mobilenet(
            _placeholder(), conv_defs=mobilenet_v3.V3_SMALL, base_only=True, final_endpoint="layer_3"
        )
    assert sorted(end_points) == ["layer_1", "layer_2", "layer_2/depthwise_output", "layer_2/output", "layer_3",
                                  "layer_3/depthwise_output", "layer_3/expansion_output", "layer_3/output"]
    assert net is end_points["layer_3"]


def test_classifier_returns_pooled_features_without_classes() -> None:
    with tf.Graph().as_default():
        net, end_points = lib.mobilenet(
            _placeholder(), num_classes=None, conv_defs=_first_layers(mobilenet_v2.V2_DEF, 3), scope="Net"
        )
        names = [v.op.name for v in tf.compat.v1.global_variables()]
    assert net is end_points["global_pool"]
    assert net.shape.as_list() == [1, 1, 1, 24]
    assert "Logits" not in end_points and not [name for name in names if "/Logits/" in name]


@pytest.mark.parametrize("use_reduce_mean_for_pooling", [False, True])
@pytest.mark.parametrize("known_size", [True, False], ids=["static-size", "dynamic-size"])
def test_global_pool_is_the_spatial_mean(use_reduce_mean_for_pooling: bool, known_size: bool) -> None:
    """The classifier's pooled features against NumPy's mean of the body output (also for unknown sizes)."""
    images = np.random.default_rng(0).uniform(-1.0, 1.0, size=(2, 40, 40, 3)).astype(np.float32)
    with tf.Graph().as_default():
        size = 40 if known_size else None
        inputs = tf.compat.v1.placeholder(tf.float32, [2, size, size, 3])
        _, end_points = lib.mobilenet(
            inputs, num_classes=None, conv_defs=_first_layers(mobilenet_v2.V2_DEF, 3),
            use_reduce_mean_for_pooling=use_reduce_mean_for_pooling,
        )
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            body, pooled = session.run([end_points["layer_3"], end_points["global_pool"]], {inputs: images})
    np.testing.assert_allclose(pooled, body.mean(axis=(1, 2), keepdims=True), rtol=POOL_TOLERANCE,
                               atol=POOL_TOLERANCE * np.abs(body).max())


def test_training_scope_leaves_batch_norm_mode_alone_when_is_training_is_none() -> None:
    batch_norm_key = slim.arg_scope_func_key(slim.batch_norm)
    assert "is_training" not in lib.training_scope(is_training=None)[batch_norm_key]
    assert lib.training_scope(is_training=False)[batch_norm_key]["is_training"] is False
    assert lib.training_scope(bn_decay=0.9)[batch_norm_key]["decay"] == 0.9


def test_is_training_reaches_batch_norm_through_training_scope() -> None:
    def batch_norm_modes(is_training: bool) -> set:
        with tf.Graph().as_default() as graph:
            with slim.arg_scope(lib.training_scope(is_training=is_training)):
                lib.mobilenet_base(_placeholder(), conv_defs=_first_layers(mobilenet_v2.V2_DEF, 2))
        return {op.get_attr("is_training") for op in graph.get_operations() if op.type.startswith("FusedBatchNorm")}

    assert batch_norm_modes(True) == {True}
    assert batch_norm_modes(False) == {False}


def test_group_norm_base_has_no_batch_norm_variables() -> None:
    with tf.Graph().as_default():
        mobilenet_v2.mobilenet_base_group_norm(_placeholder(), final_endpoint="layer_3", groups=4)
        names = [v.op.name for v in tf.compat.v1.global_variables()]
    assert [name for name in names if "/GroupNorm/" in name]
    assert not [name for name in names if "BatchNorm" in name]


def test_v3_finegrain_mode_keeps_the_last_layer_depth() -> None:
    conv_defs = _first_layers(mobilenet_v3.V3_SMALL, 2)
    with tf.Graph().as_default():
        plain, _ = mobilenet_v3.mobilenet_base(_placeholder(), conv_defs=conv_defs, depth_multiplier=0.5)
        kept, _ = mobilenet_v3.mobilenet_base(_placeholder(), conv_defs=conv_defs, depth_multiplier=0.5,
                                              finegrain_classification_mode=True, scope="Kept")
    assert plain.shape.as_list()[-1] == 8
    assert kept.shape.as_list()[-1] == 16


def test_hard_swish_takes_the_official_argument_name() -> None:
    values = np.array([-4.0, -1.5, 0.0, 2.0, 4.0], dtype=np.float32)
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        swish = session.run(mobilenet_v3.hard_swish(x=tf.constant(values)))
    np.testing.assert_allclose(swish, values * np.clip(values + 3.0, 0.0, 6.0) / 6.0, rtol=POOL_TOLERANCE)


# --- MobileNet v1 -------------------------------------------------------------------------------------------


def _v1_end_points(**kwargs) -> Dict[str, list]:
    with tf.Graph().as_default():
        _, end_points = mobilenet_v1.mobilenet_v1_base(_placeholder(kwargs.pop("size", 32)), **kwargs)
    return {name: tensor.shape.as_list() for name, tensor in end_points.items()}


def test_v1_edited_conv_defs_take_effect() -> None:
    conv_defs = copy.deepcopy(mobilenet_v1.MOBILENETV1_CONV_DEFS)[:3]
    conv_defs[2] = mobilenet_v1.DepthSepConv(kernel=[3, 3], stride=1, depth=40)
    shapes = _v1_end_points(conv_defs=conv_defs, final_endpoint="Conv2d_2_pointwise")
    assert list(shapes) == ["Conv2d_0", "Conv2d_1_depthwise", "Conv2d_1_pointwise", "Conv2d_2_depthwise",
                            "Conv2d_2_pointwise"]
    assert shapes["Conv2d_2_pointwise"] == [1, 16, 16, 40]
    assert mobilenet_v1.MOBILENETV1_CONV_DEFS[2].depth == 128


def test_v1_explicit_padding_gives_same_shapes_at_odd_sizes() -> None:
    kwargs = dict(size=33, depth_multiplier=0.25, final_endpoint="Conv2d_6_pointwise")
    assert _v1_end_points(use_explicit_padding=True, **kwargs) == _v1_end_points(**kwargs)


def test_v1_rejects_an_unknown_conv_def_type() -> None:
    with tf.Graph().as_default(), pytest.raises(ValueError, match="Conv or mobilenet_v1.DepthSepConv"):
        mobilenet_v1.mobilenet_v1_base(_placeholder(), conv_defs=[("conv", 3, 2, 32)], final_endpoint="Conv2d_0")


@pytest.mark.parametrize("num_classes", [0, None])
def test_v1_without_classes_returns_the_pooled_features(num_classes) -> None:
    with tf.Graph().as_default():
        net, end_points = mobilenet_v1.mobilenet_v1_025(_placeholder(), num_classes=num_classes)
    assert net.shape.as_list() == [1, 1, 1, 256]
    assert net is end_points["AvgPool_1a"]
    assert "Logits" not in end_points and "Predictions" not in end_points


def test_v1_logits_keep_their_spatial_dimensions_without_squeeze() -> None:
    with tf.Graph().as_default():
        logits, end_points = mobilenet_v1.mobilenet_v1_025(_placeholder(), num_classes=7, spatial_squeeze=False)
    assert logits.shape.as_list() == [1, 1, 1, 7]
    assert end_points["Predictions"].shape.as_list() == [1, 1, 1, 7]
