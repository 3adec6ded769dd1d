"""The whole procedure (``measured``): the measured default converts what pays, and its docstring holds the decision."""

import tensorflow as tf

from slim_mp.graph_pass.placement import OpTiming

from .fakes import FakeMeasure, conv_chain, measured_rewrite, op_dtype


def test_op_faster_in_low_precision_is_converted(tmp_path):
    graph, loss = conv_chain()
    report = measured_rewrite(loss, tmp_path, FakeMeasure({"Conv2D": OpTiming(float32_ms=4.0, low_ms=1.0)}))
    assert op_dtype(graph, "conv0_bf16") == tf.bfloat16
    assert report.placement.float32_ops == {}
    assert report.placement.low_ops == ["conv0"]
