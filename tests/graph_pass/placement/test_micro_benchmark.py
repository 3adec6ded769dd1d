"""Per-op micro-benchmarks (``micro_benchmark``): the benchmark graphs build and run (not how fast they are)."""

import pytest
import tensorflow as tf

from slim_mp.graph_pass.placement import MeasuringTarget
from slim_mp import timing
from slim_mp.graph_pass.placement import timing_graphs
from slim_mp.graph_pass.placement.micro_benchmark import PairRounds, micro_benchmark, open_groups
from slim_mp.graph_pass.placement.signatures import GradientTiming, OpTiming
from slim_mp.graph_pass.placement.signatures import cast_signature, op_signature

from .fakes import conv_chain


@pytest.mark.executed_ops
def test_micro_benchmark_builds_forward_and_backprop_ops():
    graph = tf.Graph()
    with graph.as_default():
        conv = tf.nn.conv2d(tf.ones([2, 6, 6, 3]), tf.ones([3, 3, 3, 4]), strides=2, padding="SAME")
        matmul = tf.matmul(tf.ones([4, 5]), tf.ones([5, 3]), transpose_a=False)
        pointwise = tf.nn.conv2d(tf.ones([2, 6, 6, 3]), tf.ones([1, 1, 3, 4]), strides=1, padding="SAME")
    signatures = [op_signature(conv.op), op_signature(matmul.op), cast_signature(64), op_signature(pointwise.op)]
    timings = micro_benchmark(signatures, tf.bfloat16, MeasuringTarget(), PairRounds(warmup=1, runs=1, settled=None))
    assert set(timings) == set(signatures)
    assert all(t.low_ms > 0 for t in timings.values())
    assert timings[signatures[2]].float32_ms == 0.0 and timings[signatures[2]].gradients == ()
    conv_timing, matmul_timing, pointwise_timing = (timings[signatures[i]] for i in (0, 1, 3))
    assert [g.role for g in conv_timing.gradients] == ["input", "filter"]
    assert [g.role for g in matmul_timing.gradients] == ["a", "b"]
    assert [g.matmul_ms is None for g in conv_timing.gradients] == [True, True], "a 3x3 filter takes no product"
    assert [g.matmul_ms is None for g in pointwise_timing.gradients] == [True, False], "a 1x1 filter does"
    for timed in (conv_timing, matmul_timing):
        assert all(isinstance(g, GradientTiming) and g.float32_ms > 0 and g.low_ms > 0 for g in timed.gradients)
        # The totals are the forward's plus the gradients' times, so they exceed the gradients'.
        assert timed.float32_ms > sum(g.float32_ms for g in timed.gradients)
        assert timed.low_ms > sum(g.low_ms for g in timed.gradients)


@pytest.mark.executed_ops
def test_inference_timing_builds_no_backprop_ops(monkeypatch):
    graphs = []
    real_session = MeasuringTarget.op_session
    monkeypatch.setattr(MeasuringTarget, "op_session",
                        lambda self, graph: graphs.append(graph) or real_session(self, graph))
    conv = op_signature(conv_chain()[0].get_operation_by_name("conv0"))
    for training in (True, False):
        assert set(micro_benchmark([conv], tf.bfloat16, MeasuringTarget(training=training),
                                   PairRounds(warmup=1, runs=1, settled=None))) == {conv}
    backprop = [{op.type for op in graph.get_operations()} & {"Conv2DBackpropInput", "Conv2DBackpropFilter"}
                for graph in graphs]
    assert backprop == [{"Conv2DBackpropInput", "Conv2DBackpropFilter"}, set()]
    assert graphs[0] is not graphs[1]


@pytest.mark.executed_ops
def test_a_pair_stops_being_timed_once_settled_says_so(monkeypatch):
    calls = []
    real_run_ms = timing.run_ms
    monkeypatch.setattr(timing, "run_ms", lambda run: calls.append(run) or real_run_ms(run))
    conv = op_signature(conv_chain()[0].get_operation_by_name("conv0"))
    signatures = [conv, cast_signature(64)]
    settled_at_once = PairRounds(0, 7, lambda low, base: True)
    assert set(micro_benchmark(signatures, tf.bfloat16, MeasuringTarget(), settled_at_once)) == set(signatures)
    # The 3x3 convolution is timed in parts (forward, input and filter gradients, per type), the cast as a pair.
    callables = 2 * 3 + 2
    assert len(calls) == callables * timing.MIN_NOISE_ROUNDS, "every signature settled at the third round"
    calls.clear()
    micro_benchmark(signatures, tf.bfloat16, MeasuringTarget(), PairRounds(0, 7, lambda low, base: False))
    assert len(calls) == callables * 7


def test_open_groups_keeps_only_the_signatures_not_yet_settled_judged_on_their_totals():
    far_apart = lambda low, base: min(low) < 0.5 * min(base)  # noqa: E731
    # Signature 1: one part per type, 10 vs 4 (settled). Signature 2: two float32 parts (6 + 4) against two
    # low ones (5 + 4) and a low alternative (1) that its total leaves out: 10 vs 9, not settled.
    times = [[10.0] * 3, [4.0] * 3, [6.0] * 3, [4.0] * 3, [5.0] * 3, [4.0] * 3, [1.0] * 3]
    groups = [([0], [1]), ([2, 3], [4, 5, 6])]
    assert open_groups(groups, far_apart)(times) == [2, 3, 4, 5, 6]
    assert open_groups(groups[:1], far_apart)(times[:2]) == []


@pytest.mark.executed_ops
def test_without_grappler_a_micro_benchmark_runs_the_same_compute_kernels():
    # Grappler is off in the micro-benchmarks' CPU session (MeasuringTarget.op_timing_config): that must
    # not change which convolution or product kernel runs, forward or backward, in either precision.
    from slim_mp.graph_pass.placement.micro_benchmark import SharedInputs, _timed_fetches
    from slim_mp.op_families import op_family

    conv = op_signature(conv_chain()[0].get_operation_by_name("conv0"))
    graph = tf.Graph()
    with graph.as_default():
        timed = _timed_fetches(conv, tf.bfloat16, True, SharedInputs())
        targets = list(timed.float32.values()) + list(timed.low.values())
        init = timing_graphs.variables_initializer()
    compute = {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"}
    executed = []
    for session in (MeasuringTarget().session(graph), MeasuringTarget().op_session(graph)):
        with session:
            session.run(init)
            kernels = set()
            for target in targets:
                metadata = tf.compat.v1.RunMetadata()
                session.run(target, options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
                            run_metadata=metadata)
                kernels |= {node.timeline_label.split(" = ")[1].split("(")[0]
                            for device in metadata.step_stats.dev_stats for node in device.node_stats
                            if " = " in node.timeline_label}
            executed.append({kernel for kernel in kernels if op_family(kernel) in compute})
    assert {op_family(kernel) for kernel in executed[0]} == compute
    assert executed[0] == executed[1]


def _micro_graph(monkeypatch, signatures) -> tf.Graph:
    """The graph ``micro_benchmark`` builds for ``signatures`` (trained), caught as its session opens."""
    graphs = []
    real_session = MeasuringTarget.op_session
    monkeypatch.setattr(MeasuringTarget, "op_session",
                        lambda self, graph: graphs.append(graph) or real_session(self, graph))
    micro_benchmark(signatures, tf.bfloat16, MeasuringTarget(), PairRounds(warmup=0, runs=1, settled=None))
    return graphs[0]


@pytest.mark.executed_ops
def test_signatures_share_inputs_of_one_shape_and_type_but_an_op_never_reads_one_twice(monkeypatch):
    graph = tf.Graph()
    with graph.as_default():
        # Two products of different layouts whose inputs and output are all [6, 6]: four equal shapes per op.
        plain = tf.matmul(tf.ones([6, 6]), tf.ones([6, 6]))
        transposed = tf.matmul(tf.ones([6, 6]), tf.ones([6, 6]), transpose_b=True)
    signatures = [op_signature(plain.op), op_signature(transposed.op)]
    variables = lambda g: [op for op in g.get_operations() if op.type == "VarHandleOp"]  # noqa: E731
    one = _micro_graph(monkeypatch, signatures[:1])
    both = _micro_graph(monkeypatch, signatures)
    # Per precision: a, b and the upstream gradient, each its own variable, and the second product reuses them.
    assert len(variables(one)) == 2 * 3
    assert len(variables(both)) == len(variables(one))
    for product in (op for op in both.get_operations() if op.type == "MatMul"):
        assert len({tensor.name for tensor in product.inputs}) == 2, product.name
    assert not [op.name for op in both.get_operations() if op.type in ("AddN", "AddV2")]


def test_a_large_batched_op_is_timed_on_part_of_its_batch_and_its_times_scaled_up():
    from slim_mp.graph_pass.placement.micro_benchmark import timed_signature

    graph = tf.Graph()
    with graph.as_default():
        conv = op_signature(tf.nn.conv2d(tf.ones([32, 10, 10, 4]), tf.ones([3, 3, 4, 4]), 1, "SAME").op)
        transposed = op_signature(tf.matmul(tf.ones([32, 40]), tf.ones([32, 5]), transpose_a=True).op)
    # 400 elements an example: 4000 fit 10 of the 32 examples.
    timed, factor = timed_signature(conv, max_elements=4000)
    assert timed.input_shapes == ((10, 10, 10, 4), (3, 3, 4, 4)) and factor == pytest.approx(3.2)
    assert timed_signature(conv, max_elements=32 * 400) == (conv, 1.0), "fits as it is"
    assert timed_signature(conv, max_elements=None) == (conv, 1.0)
    assert timed_signature(transposed, max_elements=10) == (transposed, 1.0), "its first input's rows are no batch"
    assert timed_signature(cast_signature(1 << 20), max_elements=10)[1] == 1.0


@pytest.mark.executed_ops
def test_only_the_part_of_the_batch_that_fits_is_built_and_timed(monkeypatch):
    graph = tf.Graph()
    with graph.as_default():
        conv = op_signature(tf.nn.conv2d(tf.ones([32, 10, 10, 4]), tf.ones([3, 3, 4, 4]), 1, "SAME").op)
    timed = []
    real_session = MeasuringTarget.op_session
    monkeypatch.setattr(MeasuringTarget, "op_session",
                        lambda self, graph: timed.append({tuple(op.outputs[0].shape.as_list()) for op in
                                                          graph.get_operations() if op.type == "Conv2D"})
                        or real_session(self, graph))
    timing = micro_benchmark([conv], tf.bfloat16, MeasuringTarget(), PairRounds(0, 1, None, max_elements=8 * 400))
    assert timed == [{(8, 10, 10, 4)}], "only the 8-example convolution is built and timed"
    parts = timing[conv].gradients
    assert timing[conv].float32_ms > sum(g.float32_ms for g in parts) > 0


def test_scaling_multiplies_every_time_and_keeps_the_noise():
    from slim_mp.graph_pass.placement.micro_benchmark import _scaled

    timing = OpTiming(1.0, 2.0, 0.1, (GradientTiming("input", 0.5, 0.25), GradientTiming("filter", 0.3, 0.6, 0.2)))
    assert _scaled(timing, 4.0) == OpTiming(4.0, 8.0, 0.1, (GradientTiming("input", 2.0, 1.0),
                                                             GradientTiming("filter", 1.2, 2.4, 0.8)))


@pytest.mark.executed_ops
def test_batch_norm_is_timed_low_with_its_scale_offset_and_statistics_kept_float32():
    graph = tf.Graph()
    with graph.as_default():
        inputs = tf.compat.v1.placeholder(tf.float32, [2, 6, 6, 4])
        scale, offset = tf.compat.v1.get_variable("scale", [4]), tf.compat.v1.get_variable("offset", [4])
        normalized = tf.compat.v1.nn.fused_batch_norm(inputs, scale, offset, is_training=True)[0]
    signature = op_signature(normalized.op)
    assert signature.input_shapes == ((2, 6, 6, 4),)
    assert [index for index, _ in signature.side_inputs] == [1, 2, 3, 4] and signature.side_inputs[0][1] == (4,)
    timings = micro_benchmark([signature], tf.bfloat16, MeasuringTarget(), PairRounds(0, 1, None))
    assert timings[signature].float32_ms > 0 and timings[signature].low_ms > 0
