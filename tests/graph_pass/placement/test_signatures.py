"""Op signatures (``signatures``): what an op's speed depends on, read from the real graph."""

import pytest
import tensorflow as tf

from slim_mp.graph_pass.placement import OpTiming
from slim_mp.graph_pass.placement.signatures import op_signature

from .fakes import FakeMeasure, conv_chain, measured_rewrite

tf1 = tf.compat.v1


def test_signature_carries_real_shapes_and_attributes(tmp_path):
    graph, loss = conv_chain(channels=5)
    measure = FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)})
    measured_rewrite(loss, tmp_path, measure)
    (conv,) = [s for s in measure.asked if s.op_type == "Conv2D"]
    assert conv.input_shapes == ((2, 8, 8, 5), (3, 3, 5, 5))
    attrs = dict(conv.attrs)
    assert attrs["padding"] == "SAME" and attrs["data_format"] == "NHWC" and attrs["strides"] == (1, 1, 1, 1)


def test_dynamic_shape_has_no_signature():
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.placeholder(tf.float32, [None, 8, 8, 3])
        conv = tf.nn.conv2d(images, tf.ones([3, 3, 3, 4]), strides=1, padding="VALID")
    assert op_signature(conv.op) is None


def test_the_margin_charges_the_low_time_and_a_tie_counts_as_slower():
    timing = OpTiming(float32_ms=1.0, low_ms=0.9)
    assert timing.charged_low_ms(0.2) == pytest.approx(1.08) and timing.charged_low_ms(0.0) == 0.9
    assert timing.slower_low(0.2) and not timing.slower_low(0.0)
    assert OpTiming(1.0, 1.0).slower_low(0.0), "no faster is not worth a cast"
