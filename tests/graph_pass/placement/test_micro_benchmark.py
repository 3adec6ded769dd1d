"""Per-op micro-benchmarks (``micro_benchmark``): the benchmark graphs build and run (not how fast they are)."""

import pytest
import tensorflow as tf

from slim_mp.graph_pass.placement import MeasuringTarget
from slim_mp import timing
from slim_mp.graph_pass.placement import timing_graphs
from slim_mp.graph_pass.placement.micro_benchmark import PairRounds, micro_benchmark, open_pairs
from slim_mp.graph_pass.placement.signatures import cast_signature, op_signature

from .fakes import conv_chain


@pytest.mark.executed_ops
def test_micro_benchmark_builds_forward_and_backprop_ops():
    graph = tf.Graph()
    with graph.as_default():
        conv = tf.nn.conv2d(tf.ones([2, 6, 6, 3]), tf.ones([3, 3, 3, 4]), strides=2, padding="SAME")
        matmul = tf.matmul(tf.ones([4, 5]), tf.ones([5, 3]), transpose_a=False)
    signatures = [op_signature(conv.op), op_signature(matmul.op), cast_signature(64)]
    timings = micro_benchmark(signatures, tf.bfloat16, MeasuringTarget(), PairRounds(warmup=1, runs=1, settled=None))
    assert set(timings) == set(signatures)
    assert all(t.low_ms > 0 for t in timings.values())
    assert timings[signatures[2]].float32_ms == 0.0


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


@pytest.mark.executed_ops
def test_a_pair_stops_being_timed_once_settled_says_so(monkeypatch):
    calls = []
    real_run_ms = timing.run_ms
    monkeypatch.setattr(timing, "run_ms", lambda run: calls.append(run) or real_run_ms(run))
    conv = op_signature(conv_chain()[0].get_operation_by_name("conv0"))
    signatures = [conv, cast_signature(64)]
    settled_at_once = PairRounds(0, 7, lambda low, base: True)
    assert set(micro_benchmark(signatures, tf.bfloat16, MeasuringTarget(), settled_at_once)) == set(signatures)
    assert len(calls) == 2 * 2 * timing.MIN_NOISE_ROUNDS, "every pair settled at the third round"
    calls.clear()
    micro_benchmark(signatures, tf.bfloat16, MeasuringTarget(), PairRounds(0, 7, lambda low, base: False))
    assert len(calls) == 2 * 2 * 7


def test_open_pairs_keeps_only_the_pairs_not_yet_settled():
    far_apart = lambda low, base: min(low) < 0.5 * min(base)  # noqa: E731
    times = [[10.0] * 3, [4.0] * 3, [10.0] * 3, [9.0] * 3]
    assert open_pairs(far_apart)(times) == [2, 3]
    assert open_pairs(far_apart)([[10.0] * 3, [4.0] * 3]) == []


@pytest.mark.executed_ops
def test_without_grappler_a_micro_benchmark_runs_the_same_compute_kernels():
    # Grappler is off in the micro-benchmarks' CPU session (MeasuringTarget.op_timing_config): that must
    # not change which convolution or product kernel runs, forward or backward, in either precision.
    from slim_mp.graph_pass.placement.micro_benchmark import _train_target
    from slim_mp.op_families import op_family

    conv = op_signature(conv_chain()[0].get_operation_by_name("conv0"))
    graph = tf.Graph()
    with graph.as_default():
        targets = [_train_target(conv, dtype, training=True) for dtype in (tf.float32, tf.bfloat16)]
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
