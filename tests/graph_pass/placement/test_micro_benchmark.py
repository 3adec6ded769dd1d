"""Per-op micro-benchmarks (``micro_benchmark``): the benchmark graphs build and run (not how fast they are)."""

import pytest
import tensorflow as tf

from slim_mp.graph_pass.placement import MeasuringTarget
from slim_mp.graph_pass.placement.micro_benchmark import micro_benchmark
from slim_mp.graph_pass.placement.signatures import cast_signature, op_signature

from .fakes import conv_chain


@pytest.mark.executed_ops
def test_micro_benchmark_builds_forward_and_backprop_ops():
    graph = tf.Graph()
    with graph.as_default():
        conv = tf.nn.conv2d(tf.ones([2, 6, 6, 3]), tf.ones([3, 3, 3, 4]), strides=2, padding="SAME")
        matmul = tf.matmul(tf.ones([4, 5]), tf.ones([5, 3]), transpose_a=False)
    signatures = [op_signature(conv.op), op_signature(matmul.op), cast_signature(64)]
    timings = micro_benchmark(signatures, tf.bfloat16, warmup=1, runs=1)
    assert set(timings) == set(signatures)
    assert all(t.low_ms > 0 for t in timings.values())
    assert timings[signatures[2]].float32_ms == 0.0


@pytest.mark.executed_ops
def test_inference_timing_builds_no_backprop_ops(monkeypatch):
    graphs = []
    real_session = MeasuringTarget.session
    monkeypatch.setattr(MeasuringTarget, "session", lambda self, graph: graphs.append(graph) or real_session(self, graph))
    conv = op_signature(conv_chain()[0].get_operation_by_name("conv0"))
    for training in (True, False):
        assert set(micro_benchmark([conv], tf.bfloat16, MeasuringTarget(training=training), warmup=1, runs=1)) == {conv}
    backprop = [{op.type for op in graph.get_operations()} & {"Conv2DBackpropInput", "Conv2DBackpropFilter"}
                for graph in graphs]
    assert backprop == [{"Conv2DBackpropInput", "Conv2DBackpropFilter"}, set()]
