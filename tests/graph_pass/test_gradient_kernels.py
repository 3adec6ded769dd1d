"""Gradient kernels (``gradient_kernels``): each gradient of a low op computed as chosen, against float32.

The oracle is TensorFlow's own float32 gradient of the same network. Every kernel must agree with it
to bfloat16's precision, and the graph must really compute what was chosen: a pointwise filter's
gradient as a product, a ``FLOAT32`` one by a float32 backprop op whose weight gradient needs no cast.
"""

from typing import Dict, List, Mapping, Set

import numpy as np
import pytest
import tensorflow as tf

from tensorflow.python.framework import op_def_registry

from slim_mp.graph_pass.gradient_kernels import (GRADIENT_ROLES, GradientKernel, GradientKernels, is_pointwise_conv,
                                                 kernels_for)
from slim_mp.graph_pass.op_classes import default_classes
from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.rebuild import rebuild_low_precision
from slim_mp.graph_pass.refine import painted_low_ops
from slim_mp.graph_pass.region import select_region

tf1 = tf.compat.v1
LOW, FLOAT32, MATMUL = GradientKernel.LOW, GradientKernel.FLOAT32, GradientKernel.MATMUL
WEIGHTS = ("w3x3", "w1x1", "depthwise", "dense")
# bfloat16 keeps 8 bits of mantissa: gradients through four layers agree with float32 to ~1% of their largest value.
TOLERANCE = 0.03


def _network(kernels: Mapping[str, Mapping[str, GradientKernel]], low: bool):
    """A 3x3 conv, a 1x1 conv, a depthwise conv and a dense layer; their weights' gradients, computed with
    ``kernels`` (op name -> role -> kernel) after a bfloat16 rewrite (``low``) or in float32."""
    graph = tf.Graph()
    with graph.as_default():
        rng = np.random.RandomState(0)
        images = tf.constant(rng.randn(2, 6, 6, 3).astype(np.float32))
        weights = {name: tf1.get_variable(name, initializer=(rng.randn(*shape) * 0.3).astype(np.float32))
                   for name, shape in zip(WEIGHTS, ([3, 3, 3, 4], [1, 1, 4, 5], [3, 3, 5, 1], [180, 3]))}
        net = tf.nn.relu(tf.nn.conv2d(images, weights["w3x3"], 1, "SAME", name="conv3x3"))
        net = tf.nn.relu(tf.nn.conv2d(net, weights["w1x1"], 1, "SAME", name="conv1x1"))
        net = tf.nn.depthwise_conv2d(net, weights["depthwise"], [1, 1, 1, 1], "SAME", name="depthwise")
        loss = tf.reduce_sum(tf.square(tf.matmul(tf.reshape(net, [2, -1]), weights["dense"], name="dense")))
        if low:
            config = PaintConfig(tf.bfloat16, default_classes(tf.bfloat16), [], "CPU")
            decisions, ops = painted_low_ops(select_region(loss), config)
            rebuilder = rebuild_low_precision(graph, ops, {op: d.ports for op, d in decisions.items()}, tf.bfloat16,
                                              GradientKernels.by_role(kernels))
            loss = rebuilder.remap(loss)
        gradients = tf.gradients(loss, [weights[name] for name in WEIGHTS])
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            values = session.run(gradients)
    return graph, gradients, dict(zip(WEIGHTS, values))


def _computing(gradients: List[tf.Tensor]) -> List[tf.Operation]:
    """The ops the gradients need, walking inputs back from them (what a session runs)."""
    seen: Set[tf.Operation] = set()
    stack = [g.op for g in gradients]
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
    return list(seen)


@pytest.fixture(scope="module")
def float32_reference() -> Dict[str, np.ndarray]:
    return _network({}, low=False)[2]


@pytest.mark.parametrize("kernels", [
    {},
    {"conv1x1": {"filter": MATMUL}},
    {"conv3x3": {"input": FLOAT32, "filter": FLOAT32}, "conv1x1": {"filter": FLOAT32},
     "depthwise": {"input": FLOAT32, "filter": FLOAT32}, "dense": {"a": FLOAT32, "b": FLOAT32}},
    {"depthwise": {"input": FLOAT32}, "conv1x1": {"input": FLOAT32, "filter": MATMUL}},
], ids=["all low", "pointwise filter as a product", "all float32", "mixed"])
def test_every_kernel_agrees_with_the_float32_gradients(kernels, float32_reference):
    _, gradients, values = _network(kernels, low=True)
    assert [g.dtype for g in gradients] == [tf.float32] * len(WEIGHTS)
    for name in WEIGHTS:
        reference = float32_reference[name]
        error = np.abs(values[name] - reference).max() / np.abs(reference).max()
        assert error < TOLERANCE, f"{name}: {error:.4f}"


def test_a_pointwise_filter_gradient_is_one_product_and_no_backprop_filter_runs():
    _, gradients, _ = _network({"conv1x1": {"filter": MATMUL}}, low=True)
    needed = _computing(gradients)
    products = [op for op in needed if op.type == "MatMul" and "conv1x1" in op.name]
    assert len(products) == 1 and products[0].get_attr("T") == tf.bfloat16
    assert not [op for op in needed if op.type == "Conv2DBackpropFilter" and "conv1x1" in op.name]
    assert [op for op in needed if op.type == "Conv2DBackpropFilter" and "conv3x3" in op.name], "others unchanged"


def test_a_float32_weight_gradient_runs_in_float32_and_reaches_the_weight_without_a_cast():
    _, gradients, _ = _network({"conv3x3": {"filter": FLOAT32}}, low=True)
    needed = _computing(gradients)
    (backprop,) = [op for op in needed if op.type == "Conv2DBackpropFilter" and "conv3x3" in op.name]
    assert backprop.get_attr("T") == tf.float32
    assert not [op for op in needed if op.type == "Conv2D" and "twin" in op.name], "the twin itself never runs"
    # The weight's gradient (the first) is the float32 backprop's output, through identities only: no cast.
    producer = gradients[0].op
    while producer.type == "Identity":
        producer = producer.inputs[0].op
    assert producer is backprop


def test_a_float32_input_gradient_is_cast_back_to_the_low_type_for_the_layer_before():
    _, gradients, _ = _network({"conv1x1": {"input": FLOAT32}}, low=True)
    needed = _computing(gradients)
    (backprop,) = [op for op in needed if op.type == "Conv2DBackpropInput" and "conv1x1" in op.name]
    assert backprop.get_attr("T") == tf.float32
    consumers = {op.type for tensor in backprop.outputs for op in tensor.consumers() if op in needed}
    assert consumers == {"Cast"}


@pytest.mark.parametrize("attrs, shapes, pointwise", [
    ({"strides": [1, 1, 1, 1], "padding": b"SAME", "data_format": b"NHWC", "dilations": [1, 1, 1, 1]},
     [[8, 7, 7, 4], [1, 1, 4, 5]], True),
    ({"strides": [1, 2, 2, 1], "padding": b"SAME", "data_format": b"NHWC", "dilations": [1, 1, 1, 1]},
     [[8, 7, 7, 4], [1, 1, 4, 5]], False),
    ({"strides": [1, 1, 1, 1], "padding": b"SAME", "data_format": b"NHWC", "dilations": [1, 2, 2, 1]},
     [[8, 7, 7, 4], [1, 1, 4, 5]], False),
    ({"strides": [1, 1, 1, 1], "padding": b"SAME", "data_format": b"NCHW", "dilations": [1, 1, 1, 1]},
     [[8, 4, 7, 7], [1, 1, 4, 5]], False),
    ({"strides": [1, 1, 1, 1], "padding": b"EXPLICIT", "data_format": b"NHWC", "dilations": [1, 1, 1, 1]},
     [[8, 7, 7, 4], [1, 1, 4, 5]], False),
    ({"strides": [1, 1, 1, 1], "padding": b"SAME", "data_format": b"NHWC", "dilations": [1, 1, 1, 1]},
     [[8, 7, 7, 4], [3, 3, 4, 5]], False),
])
def test_only_a_pointwise_convolution_s_filter_takes_the_product(attrs, shapes, pointwise):
    assert is_pointwise_conv("Conv2D", attrs, shapes[1]) == pointwise
    assert (MATMUL in kernels_for("Conv2D", "filter", attrs, shapes)) == pointwise
    assert kernels_for("Conv2D", "input", attrs, shapes) == (LOW, FLOAT32)


def test_a_kernel_an_op_cannot_take_is_refused_naming_the_op():
    graph, _, _ = _network({}, low=False)
    ops = {op.name: op for op in graph.get_operations()}
    fitting = {"conv3x3": {"input": FLOAT32, "filter": FLOAT32}, "conv1x1": {"filter": MATMUL}}
    GradientKernels.by_role(fitting).check(ops)
    with pytest.raises(ValueError, match=r"conv3x3 \(Conv2D\) cannot take the matmul kernel for its filter gradient"):
        GradientKernels.by_role({"conv3x3": {"filter": MATMUL}}).check(ops)
    with pytest.raises(ValueError, match=r"conv3x3 \(Conv2D\) has no 'bias' gradient"):
        GradientKernels.by_role({"conv3x3": {"bias": FLOAT32}}).check(ops)
    with pytest.raises(ValueError, match="conv9 is not in this graph"):
        GradientKernels.by_role({"conv9": {"filter": FLOAT32}}).check(ops)
    with pytest.raises(ValueError, match="conv3x3's filter gradient names the kernel 'float64', which is none of low"):
        GradientKernels.by_role({"conv3x3": {"filter": "float64"}})


def test_the_roles_are_the_inputs_tensorflow_names_in_its_op_definitions():
    for op_type, roles in GRADIENT_ROLES.items():
        names = [arg.name for arg in op_def_registry.get(op_type).input_arg]
        assert tuple(names[:len(roles)]) == roles and len(names) == len(roles), op_type


def test_the_choice_by_role_is_applied_by_input_index_and_written_and_read_as_json():
    graph, _, _ = _network({}, low=False)
    conv = graph.get_operation_by_name("conv1x1")
    (dense,) = [op for op in graph.get_operations() if op.type == "MatMul" and "gradients" not in op.name]
    chosen = GradientKernels.by_role({conv.name: {"filter": MATMUL, "input": LOW}, dense.name: {"a": FLOAT32}})
    assert chosen.as_json() == {"conv1x1": {"filter": "matmul"}, dense.name: {"a": "float32"}}
    assert chosen.by_input(conv) == {1: MATMUL} and chosen.by_input(dense) == {0: FLOAT32}
    assert GradientKernels.by_role(chosen.as_json()) == chosen and hash(GradientKernels.by_role(chosen.as_json()))
    assert chosen.only([dense.name]).as_json() == {dense.name: {"a": "float32"}} and not chosen.only([])
    assert chosen.counts() == {"matmul": 1, "float32": 1}
