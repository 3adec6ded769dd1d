"""Gradient kernel choice (``kernel_choice``): the cheapest kernels per op, the casts they add counted.

The expected prices are worked out by hand below from the timings, the shapes and the cast model:
one cast of n elements costs half a modelled cast pair, here 0.0001 ms per element (0.00005 one way).
"""

import json

import pytest
import tensorflow as tf

from slim_mp.graph_pass.gradient_kernels import GradientKernel
from slim_mp.graph_pass.placement.estimate import CastModel
from slim_mp.graph_pass.placement.kernel_choice import choose_kernels
from slim_mp.graph_pass.placement.noise import NoiseRule
from slim_mp.graph_pass.placement.signatures import GradientTiming, OpTiming
from slim_mp.graph_pass.rewrite import rewrite

from .fakes import FakeMeasure, conv_chain, measured_rewrite, refuse

CASTS = CastModel(fixed_ms=0.0, per_element_ms=0.0001)
RULE = NoiseRule(floor=0.01)
# input 8x10x10x4 = 3200 elements (one cast 0.16 ms), pointwise filter 4x5 = 20 (0.001 ms), its output 8x10x10x5 =
# 4000 (0.2 ms); a depthwise filter 3x3x4x1 = 36 (0.0018 ms), its output as large as its input.
X_CAST, W_CAST, DY_CAST = 0.16, 0.001, 0.2
DEPTHWISE_W_CAST, DEPTHWISE_DY_CAST = 0.0018, 0.16


def _op(kind: str) -> tf.Operation:
    graph = tf.Graph()
    with graph.as_default():
        images = tf.ones([8, 10, 10, 4])
        if kind == "pointwise":
            return tf.nn.conv2d(images, tf.ones([1, 1, 4, 5]), strides=1, padding="SAME").op
        return tf.nn.depthwise_conv2d(images, tf.ones([3, 3, 4, 1]), [1, 1, 1, 1], "SAME").op


def _timing(forward: float, input_gradient: GradientTiming, filter_gradient: GradientTiming) -> OpTiming:
    return OpTiming(float32_ms=forward + input_gradient.float32_ms + filter_gradient.float32_ms,
                    low_ms=forward + input_gradient.low_ms + filter_gradient.low_ms, noise=0.0,
                    gradients=(input_gradient, filter_gradient))


def test_a_pointwise_filter_gradient_is_a_product_when_that_is_cheaper():
    timing = _timing(0.3, GradientTiming("input", 1.0, 0.5), GradientTiming("filter", 1.0, 2.0, matmul_ms=0.4))
    choice = choose_kernels(_op("pointwise"), timing, CASTS, RULE, "bfloat16")
    assert choice.kernels == {"filter": GradientKernel.MATMUL}
    # All low: 0.5 + 2.0 + the weight gradient's cast; with the product: 0.5 + 0.4 + that cast.
    assert choice.low_ms == pytest.approx(timing.low_ms - (0.5 + 2.0 + W_CAST) + (0.5 + 0.4 + W_CAST))
    assert choice.reason.startswith("filter gradient as a bfloat16 matrix product: gradients 0.901 ms vs 2.501 ms")


def test_a_depthwise_input_gradient_runs_float32_when_its_casts_still_leave_it_cheaper():
    timing = _timing(0.3, GradientTiming("input", 0.2, 3.0), GradientTiming("filter", 0.6, 0.3))
    choice = choose_kernels(_op("depthwise"), timing, CASTS, RULE, "bfloat16")
    assert choice.kernels == {"input": GradientKernel.FLOAT32}
    # float32 input gradient: 0.2 + the output gradient cast up + its result cast down (the filter is a weight:
    # its float32 read is free); the filter gradient stays low with its weight cast: 0.822 ms. Both float32
    # would cost 0.2 + 0.16 + 0.6 + 0.16 + the input cast up 0.16 = 1.28 ms.
    chosen = 0.2 + DEPTHWISE_DY_CAST + X_CAST + 0.3 + DEPTHWISE_W_CAST
    assert choice.low_ms == pytest.approx(timing.low_ms - (3.0 + 0.3 + DEPTHWISE_W_CAST) + chosen)


def test_both_float32_gradients_share_one_cast_of_the_output_gradient():
    # Input float32 alone: 0.05 + dy 0.16 + its result down 0.16, the filter low 1.0: 1.37 ms; both: 0.58 ms.
    timing = _timing(0.3, GradientTiming("input", 0.05, 3.0), GradientTiming("filter", 0.05, 1.0))
    choice = choose_kernels(_op("depthwise"), timing, CASTS, RULE, "bfloat16")
    assert choice.kernels == {"input": GradientKernel.FLOAT32, "filter": GradientKernel.FLOAT32}
    both = 0.05 + 0.05 + DEPTHWISE_DY_CAST + X_CAST + X_CAST  # dy once; the input up (filter's), the result down
    assert choice.low_ms == pytest.approx(timing.low_ms - (3.0 + 1.0 + DEPTHWISE_W_CAST) + both)


def test_a_float32_kernel_faster_alone_but_not_with_its_casts_stays_low():
    # Input gradient 0.4 in float32 vs 0.6 low, but 0.4 + 0.2 + 0.16 = 0.76 with its casts.
    timing = _timing(0.3, GradientTiming("input", 0.4, 0.6), GradientTiming("filter", 1.0, 0.5, matmul_ms=0.6))
    choice = choose_kernels(_op("pointwise"), timing, CASTS, RULE, "bfloat16")
    assert choice.kernels == {} and choice.low_ms == timing.low_ms and choice.reason == ""


def test_a_win_inside_the_noise_floor_keeps_tensorflows_own_low_gradients():
    timing = _timing(0.3, GradientTiming("input", 5.0, 0.5), GradientTiming("filter", 5.0, 1.0, matmul_ms=0.995))
    choice = choose_kernels(_op("pointwise"), timing, CASTS, RULE, "bfloat16")
    assert choice.kernels == {}, "0.5% cheaper is inside the 1% floor"


def test_an_op_timed_whole_has_no_choice():
    timing = OpTiming(2.0, 1.0, 0.0)
    choice = choose_kernels(_op("pointwise"), timing, CASTS, RULE, "bfloat16")
    assert choice.kernels == {} and choice.low_ms == 1.0


# --- the choice end to end: the plan, the decisions file, the rebuilt graph -----------------------------------

SLOW_LOW_FILTER = OpTiming(2.0, 1.2, 0.0, (GradientTiming("input", 0.5, 0.3), GradientTiming("filter", 0.1, 0.6)))


def _backprop_filter_types(report_graph: tf.Graph, loss: tf.Tensor) -> list:
    """The types of the filter gradients the training step would run, one per convolution."""
    with report_graph.as_default():
        gradients = tf.gradients(loss, tf.compat.v1.trainable_variables())
    needed, stack = set(), [g.op for g in gradients]
    while stack:
        op = stack.pop()
        if op not in needed:
            needed.add(op)
            stack.extend(t.op for t in op.inputs)
    return sorted(op.get_attr("T").name for op in needed if op.type == "Conv2DBackpropFilter")


def test_the_plan_pins_the_chosen_kernels_and_a_resumed_run_builds_the_same_gradients(tmp_path):
    path = str(tmp_path / "run" / "placement.json")
    graph, loss = conv_chain(2)
    report = measured_rewrite(loss, tmp_path, FakeMeasure({"Conv2D": SLOW_LOW_FILTER}), decisions_file=path)
    assert report.placement.gradient_kernels.as_json() == {"conv0": {"filter": "float32"},
                                                           "conv1": {"filter": "float32"}}
    assert report.placement.gradient_reasons["conv0"].startswith("filter gradient in float32: gradients ")
    assert _backprop_filter_types(graph, report.remap(loss)) == ["float32", "float32"]
    stored = json.load(open(path))
    assert stored["gradient_kernels"] == report.placement.gradient_kernels.as_json()
    graph, loss = conv_chain(2)
    again = measured_rewrite(loss, tmp_path, refuse, decisions_file=path, write_decisions=False)
    assert again.placement.gradient_kernels == report.placement.gradient_kernels
    assert _backprop_filter_types(graph, again.remap(loss)) == ["float32", "float32"]


def test_the_static_placement_keeps_tensorflows_own_low_gradients(tmp_path):
    graph, loss = conv_chain(2)
    with graph.as_default():
        report = rewrite(loss, "bfloat16", device_type="CPU", placement="static")
    assert report.placement is None
    assert _backprop_filter_types(graph, report.remap(loss)) == ["bfloat16", "bfloat16"]


@pytest.mark.parametrize("kernels, problem", [
    ({"conv0": {"filter": "matmul"}}, r"conv0 \(Conv2D\) cannot take the matmul kernel for its filter gradient"),
    ({"conv0": {"weights": "float32"}}, r"conv0 \(Conv2D\) has no 'weights' gradient"),
])
def test_a_decisions_file_with_kernels_the_graph_cannot_take_is_one_error_naming_it(tmp_path, kernels, problem):
    path = tmp_path / "placement.json"
    path.write_text(json.dumps({"precision": "bfloat16", "float32_ops": {}, "low_ops": ["conv0"],
                                "gradient_kernels": kernels}))
    with pytest.raises(ValueError, match=rf"placement.json holds placement decisions for another graph \({problem}"):
        measured_rewrite(conv_chain(1)[1], tmp_path, refuse, decisions_file=str(path))


def test_a_decisions_file_naming_no_kernel_is_damaged_and_the_error_says_which(tmp_path):
    path = tmp_path / "placement.json"
    path.write_text(json.dumps({"precision": "bfloat16", "float32_ops": {}, "low_ops": ["conv0"],
                                "gradient_kernels": {"conv0": {"filter": "float64"}}}))
    with pytest.raises(ValueError, match=r"placement.json: 'gradient_kernels': conv0's filter gradient names the "
                                         r"kernel 'float64', which is none of low, float32, matmul: it is not a "
                                         r"placement decisions file"):
        measured_rewrite(conv_chain(1)[1], tmp_path, refuse, decisions_file=str(path))
