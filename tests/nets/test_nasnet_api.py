"""The official public API of nets.nasnet: configs users edit, data_format, bounded activations,
the aux head switch, the nasnet_utils functions and the official cell classes.

Networks are built with few cells and filters (tiny configs), so each check builds in seconds;
the full-size official layouts are checked in test_nets_nasnet.py.
"""

import dataclasses
import functools

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from nets.nasnet import nasnet, nasnet_utils, pnasnet

# Facts from the official tensorflow/models research/slim/nets/nasnet sources.
OFFICIAL_CONFIGS = {
    (nasnet, "cifar_config"): dict(
        stem_multiplier=3.0, drop_path_keep_prob=0.6, num_cells=18, use_aux_head=1, num_conv_filters=32,
        dense_dropout_keep_prob=1.0, filter_scaling_rate=2.0, num_reduction_layers=2, data_format="NHWC",
        skip_reduction_layer_input=0, total_training_steps=937500, use_bounded_activation=False,
    ),
    (nasnet, "large_imagenet_config"): dict(
        stem_multiplier=3.0, drop_path_keep_prob=0.7, num_cells=18, use_aux_head=1, num_conv_filters=168,
        dense_dropout_keep_prob=0.5, filter_scaling_rate=2.0, num_reduction_layers=2, data_format="NHWC",
        skip_reduction_layer_input=1, total_training_steps=250000, use_bounded_activation=False,
    ),
    (nasnet, "mobile_imagenet_config"): dict(
        stem_multiplier=1.0, drop_path_keep_prob=1.0, num_cells=12, use_aux_head=1, num_conv_filters=44,
        dense_dropout_keep_prob=0.5, filter_scaling_rate=2.0, num_reduction_layers=2, data_format="NHWC",
        skip_reduction_layer_input=0, total_training_steps=250000, use_bounded_activation=False,
    ),
    (pnasnet, "large_imagenet_config"): dict(
        stem_multiplier=3.0, drop_path_keep_prob=0.6, num_cells=12, use_aux_head=1, num_conv_filters=216,
        dense_dropout_keep_prob=0.5, filter_scaling_rate=2.0, num_reduction_layers=2, data_format="NHWC",
        skip_reduction_layer_input=1, total_training_steps=250000, use_bounded_activation=False,
    ),
    (pnasnet, "mobile_imagenet_config"): dict(
        stem_multiplier=1.0, drop_path_keep_prob=1.0, num_cells=9, use_aux_head=1, num_conv_filters=54,
        dense_dropout_keep_prob=0.5, filter_scaling_rate=2.0, num_reduction_layers=2, data_format="NHWC",
        skip_reduction_layer_input=1, total_training_steps=250000, use_bounded_activation=False,
    ),
}
TINY = dict(num_cells=3, num_conv_filters=8)


def _tiny(config_fn, **changes):
    return dataclasses.replace(config_fn(), **TINY, **changes)


def _build(build_fn, image_size: int, config, num_classes: int = 10, **kwargs):
    """Build in a fresh graph; return the graph and the end points."""
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, image_size, image_size, 3])
        with slim.arg_scope(nasnet.nasnet_mobile_arg_scope()):
            _, end_points = build_fn(images, num_classes, config=config, **kwargs)
    return graph, end_points


def _tiny_cifar_build(use_aux_head: int = 1, use_bounded_activation: bool = False):
    """The tiny NASNet-CIFAR at 32 px, built once per process for the checks that only read its graph."""
    return _cached_tiny_cifar_build(use_aux_head, use_bounded_activation)


@functools.lru_cache(maxsize=None)
def _cached_tiny_cifar_build(use_aux_head: int, use_bounded_activation: bool):
    config = _tiny(nasnet.cifar_config, use_aux_head=use_aux_head, use_bounded_activation=use_bounded_activation)
    return _build(nasnet.build_nasnet_cifar, 32, config)


@pytest.mark.parametrize("key", sorted(OFFICIAL_CONFIGS, key=lambda key: (key[0].__name__, key[1])),
                         ids=lambda key: f"{key[0].__name__.split('.')[-1]}.{key[1]}")
def test_config_functions_return_the_official_values(key):
    module, name = key
    assert getattr(module, name)().values() == OFFICIAL_CONFIGS[key]


def test_each_config_call_returns_a_fresh_object():
    edited = nasnet.cifar_config()
    edited.set_hparam("num_cells", 6)
    assert nasnet.cifar_config().num_cells == 18


def test_set_hparam_checks_names_and_types():
    config = nasnet.mobile_imagenet_config()
    config.set_hparam("stem_multiplier", 2)
    assert config.stem_multiplier == 2.0 and isinstance(config.stem_multiplier, float)
    config.override_from_dict({"use_aux_head": 0, "data_format": "NCHW"})
    assert (config.use_aux_head, config.data_format) == (0, "NCHW")
    with pytest.raises(KeyError, match="num_celss"):
        config.set_hparam("num_celss", 3)
    with pytest.raises(ValueError, match="num_cells"):
        config.set_hparam("num_cells", 3.5)
    with pytest.raises(ValueError, match="use_bounded_activation"):
        config.set_hparam("use_bounded_activation", 1)


@pytest.mark.parametrize("build_fn, config_fn", [
    (nasnet.build_nasnet_cifar, nasnet.cifar_config),
    pytest.param(pnasnet.build_pnasnet_mobile, pnasnet.mobile_imagenet_config, marks=pytest.mark.slow),
])
def test_use_aux_head_switches_the_aux_logits(build_fn, config_fn):
    for use_aux_head in (1, 0):
        if build_fn is nasnet.build_nasnet_cifar:
            _, end_points = _tiny_cifar_build(use_aux_head=use_aux_head)
        else:
            _, end_points = _build(build_fn, 96, _tiny(config_fn, use_aux_head=use_aux_head))
        assert ("AuxLogits" in end_points) == bool(use_aux_head)


@pytest.mark.parametrize("build_fn, config_fn", [
    pytest.param(nasnet.build_nasnet_mobile, nasnet.mobile_imagenet_config, marks=pytest.mark.slow),
    pytest.param(pnasnet.build_pnasnet_mobile, pnasnet.mobile_imagenet_config, marks=pytest.mark.slow),
])
def test_nchw_builds_the_same_variables_with_transposed_end_points(build_fn, config_fn):
    nhwc_graph, nhwc = _build(build_fn, 96, _tiny(config_fn))
    nchw_graph, nchw = _build(build_fn, 96, _tiny(config_fn, data_format="NCHW"))
    assert list(nchw) == list(nhwc)
    for name, tensor in nhwc.items():
        shape = tensor.shape.as_list()
        expected = [shape[0], shape[3], shape[1], shape[2]] if len(shape) == 4 else shape
        assert nchw[name].shape.as_list() == expected, name

    def layout(graph):
        return sorted((v.op.name, v.shape.as_list()) for v in graph.get_collection("variables"))

    assert layout(nchw_graph) == layout(nhwc_graph)


@pytest.mark.parametrize("bounded", [True, False])
def test_bounded_activations_replace_every_relu(bounded):
    graph, _ = _tiny_cifar_build(use_bounded_activation=bounded)
    op_types = {op.type for op in graph.get_operations()}
    assert ("Relu6" in op_types) == bounded
    assert ("Relu" in op_types) == (not bounded)
    assert any("clip_by_value" in op.name for op in graph.get_operations()) == bounded


def test_building_does_not_modify_the_config():
    config = _tiny(nasnet.cifar_config)
    before = config.values()
    _build(nasnet.build_nasnet_cifar, 32, config, is_training=False)
    assert config.values() == before


def test_current_step_replaces_the_global_step():
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, 32, 32, 3])
        step = tf.compat.v1.placeholder(tf.int64, [])
        with slim.arg_scope(nasnet.nasnet_cifar_arg_scope()):
            nasnet.build_nasnet_cifar(images, 10, config=_tiny(nasnet.cifar_config), current_step=step)
        assert tf.compat.v1.train.get_global_step() is None
        assert any(op.type == "RandomUniform" for op in graph.get_operations())


@pytest.mark.parametrize("data_format, expected_index", [("NHWC", 3), ("NCHW", 1)])
def test_channel_helpers_follow_the_data_format(data_format, expected_index):
    assert nasnet_utils.get_channel_index(data_format) == expected_index
    assert nasnet_utils.get_channel_dim([10, 20, 30, 40], data_format) == [10, 20, 30, 40][expected_index]
    with slim.arg_scope([nasnet_utils.get_channel_index], data_format=data_format):
        assert nasnet_utils.get_channel_index() == expected_index


def test_channel_helpers_need_a_data_format():
    with pytest.raises(ValueError, match="data_format"):
        nasnet_utils.get_channel_index()


@pytest.mark.parametrize("data_format, axes", [("NHWC", (1, 2)), ("NCHW", (2, 3))])
def test_global_avg_pool_averages_the_spatial_axes(data_format, axes):
    values = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        pooled = session.run(nasnet_utils.global_avg_pool(tf.constant(values), data_format))
    np.testing.assert_allclose(pooled, values.mean(axis=axes), rtol=1e-5)


def test_factorized_reduction_in_nchw_has_the_nchw_shape():
    with tf.Graph().as_default():
        output = nasnet_utils.factorized_reduction(
            tf.compat.v1.placeholder(tf.float32, [2, 6, 10, 10]), 8, stride=2, data_format="NCHW"
        )
    assert output.shape.as_list() == [2, 8, 5, 5]


def test_drop_path_outside_training_is_the_identity():
    with tf.Graph().as_default():
        net = tf.ones([4, 2, 2, 3])
        assert nasnet_utils.drop_path(net, 0.5, is_training=False) is net


def _run_cell(cell, prev_layer_shape=None, **call_args):
    graph = tf.Graph()
    with graph.as_default():
        net = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 16])
        prev_layer = None if prev_layer_shape is None else tf.compat.v1.placeholder(tf.float32, prev_layer_shape)
        with slim.arg_scope(nasnet.nasnet_mobile_arg_scope()):
            with slim.arg_scope([nasnet_utils.get_channel_index, nasnet_utils.get_channel_dim,
                                 nasnet_utils.factorized_reduction], data_format="NHWC"):
                output = cell(net, scope="my_cell", prev_layer=prev_layer, **call_args)
    names = {v.op.name for v in graph.get_collection("variables")}
    return output, names


def test_official_cells_build_the_official_scopes():
    normal = nasnet_utils.NasNetANormalCell(8, 1.0, 10, 1000)
    output, names = _run_cell(normal, prev_layer_shape=[2, 16, 16, 4], filter_scaling=2, cell_num=3)
    # Six states reach the output (all but the projected input), each 16 filters wide.
    assert output.shape.as_list() == [2, 8, 8, 6 * 16]
    assert "my_cell/comb_iter_0/left/separable_5x5_1/depthwise_weights" in names
    assert "my_cell/path1_conv/weights" in names  # the larger previous layer is reduced
    reduction = nasnet_utils.NasNetAReductionCell(8, 1.0, 10, 1000)
    output, _ = _run_cell(reduction, stride=2, cell_num=3)
    assert output.shape.as_list() == [2, 4, 4, 4 * 8]
    output, _ = _run_cell(pnasnet.PNasNetNormalCell(8, 1.0, 10, 1000), stride=2, cell_num=3)
    assert output.shape.as_list() == [2, 4, 4, 5 * 8]


def test_a_custom_base_cell_takes_official_operation_names():
    cell = nasnet_utils.NasNetABaseCell(
        num_conv_filters=4,
        operations=["none", "avg_pool_3x3", "max_pool_3x3", "separable_3x3", "none"] * 2,
        used_hiddenstates=[1, 1, 0, 0, 0, 0, 0],
        hiddenstate_indices=[0, 1, 2, 0, 3, 1, 4, 0, 5, 2],
        drop_path_keep_prob=1.0,
        total_num_cells=4,
        total_training_steps=100,
    )
    output, names = _run_cell(cell, cell_num=0)
    assert output.shape.as_list() == [2, 8, 8, 5 * 4]
    assert "my_cell/comb_iter_1/right/separable_3x3_1/depthwise_weights" in names
    assert not any("separable_3x3_2" in name for name in names)


@pytest.mark.parametrize("operation", ["conv_3x3", "separable_3x5_2", "avg_pool_3", "separable_3x3_x"])
def test_unknown_operation_names_are_rejected(operation):
    with pytest.raises(ValueError, match="Operation|operation"):
        nasnet_utils.NasNetABaseCell(4, [operation] + ["none"] * 9, [1, 0, 0, 0, 0, 0, 0], [0] * 10, 1.0, 4, 100)


def test_drop_path_cells_need_their_depth():
    cell = nasnet_utils.NasNetANormalCell(8, 0.5, 10, 1000)
    with pytest.raises(ValueError, match="cell_num"):
        _run_cell(cell)
