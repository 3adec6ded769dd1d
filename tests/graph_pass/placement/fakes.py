"""Shared fakes and small graphs of the placement tests.

Timings come from fakes (``FakeMeasure`` per op type, ``FakeSteps`` per candidate), so no decision
depends on this machine's speed; ``refuse`` / ``refuse_steps`` fail a test that should measure nothing.
"""

import dataclasses

import numpy as np
import tensorflow as tf
import tf_slim as slim

from slim_mp.graph_pass.op_classes import default_classes
from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement import (OpTiming, PlacementFiles, PlacementMeasuring, PlacementOptions,
                                          PlacementTuning)
from slim_mp.timing import Timed
from slim_mp.graph_pass.placement.region_copy import copy_region
from slim_mp.graph_pass.region import select_region
from slim_mp.graph_pass.rewrite import rewrite

tf1 = tf.compat.v1


class FakeMeasure:
    """Timings by op type (and for casts), recording every signature it is asked for; a type it does not
    name is left out, as a micro-benchmark leaves out an op it cannot time."""

    def __init__(self, by_type, cast_ms=0.001):
        self.by_type = by_type
        self.cast_ms = cast_ms
        self.asked = []

    def __call__(self, signatures, precision):
        self.asked.extend(signatures)
        result = {}
        for signature in signatures:
            if signature.op_type == "Cast":
                result[signature] = OpTiming(0.0, self.cast_ms)
            elif signature.op_type in self.by_type:
                result[signature] = self.by_type[signature.op_type]
        return result


def refuse(signatures, precision):
    raise AssertionError(f"measured {signatures} although the timings should come from the cache or the file")


def refuse_steps(candidates, reference):
    raise AssertionError(f"timed {candidates} although no step should be timed")


def conv_chain(num_convs=1, channels=4):
    """A graph: fixed-shape input -> ``num_convs`` conv+relu layers -> mean loss; returns (graph, loss)."""
    graph = tf.Graph()
    with graph.as_default():
        net = tf1.placeholder(tf.float32, [2, 8, 8, channels], name="images")
        for index in range(num_convs):
            weights = tf1.get_variable(f"w{index}", [3, 3, channels, channels])
            net = tf.nn.relu(tf.nn.conv2d(net, weights, strides=1, padding="SAME", name=f"conv{index}"))
        loss = tf.reduce_mean(tf.square(net))
    return graph, loss


def placement_options(**fields):
    """``PlacementOptions`` with ``fields``, each put in the record that has it (``cache_dir`` in ``files``,
    ``measure`` in ``measuring``, ``verify_window`` in ``tuning``...): the tests' shorthand."""
    records = {}
    for record in (PlacementFiles, PlacementMeasuring, PlacementTuning):
        names = {field.name for field in dataclasses.fields(record)}
        records[record] = record(**{name: fields.pop(name) for name in names & set(fields)})
    assert not fields, f"no placement record has {sorted(fields)}"
    return PlacementOptions(*records.values())


def measured_rewrite(loss, tmp_path, measure, **options):
    """The measured rewrite with fake op timings; whole steps are not timed unless ``measure_steps`` is given."""
    options.setdefault("time_steps", "measure_steps" in options)
    with loss.graph.as_default():
        return rewrite(loss, "bfloat16", device_type="CPU", placement="measured",
                       placement_options=placement_options(cache_dir=str(tmp_path / "cache"), measure=measure,
                                                           **options))


class FakeSteps:
    """Whole-step timings from a function of the candidate (milliseconds, or a ``Timed`` with its noise),
    recording every batch it is asked for: the search's, then the whole-step check's."""

    def __init__(self, ms_of):
        self.ms_of = ms_of
        self.asked = []

    def __call__(self, candidates, reference):
        self.asked.append(list(candidates))
        values = [self.ms_of(candidate) for candidate in candidates]
        return [value if isinstance(value, Timed) else Timed(value) for value in values]


def conv_bias_scale_chain():
    """input -> conv -> bias add -> scale (times a variable of its shape) -> exp (deny) -> loss: the scale is
    the tail after the last allow op (the bias add is fused into the conv, so it stays with it)."""
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.placeholder(tf.float32, [2, 8, 8, 4], name="images")
        weights = tf1.get_variable("w", [3, 3, 4, 4])
        net = tf.nn.conv2d(images, weights, strides=1, padding="SAME", name="conv")
        net = tf.nn.bias_add(net, tf1.get_variable("b", [4]), name="bias")
        net = tf.multiply(net, tf1.get_variable("s", [2, 8, 8, 4]), name="scale")
        loss = tf.reduce_mean(tf.exp(net))
    return graph, loss


def op_dtype(graph, name):
    return graph.get_operation_by_name(name).outputs[0].dtype


# Conv timings whose estimates disagree: +20% margin says float32 (1.08 vs 1.0), no margin says low.
CLOSE_CALL = {"Conv2D": OpTiming(float32_ms=1.0, low_ms=0.9)}


def conv_then_while_loop():
    """Two convs, then a TF1 while loop: a region the whole-step copies cannot stand for. Returns the loss."""
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.placeholder(tf.float32, [2, 8, 8, 4])
        weights = tf1.get_variable("w", [3, 3, 4, 4])
        net = tf.nn.conv2d(images, weights, strides=1, padding="SAME", name="conv0")
        net = tf.nn.conv2d(net, weights, strides=1, padding="SAME", name="conv1")
        _, net = tf.while_loop(lambda i, x: i < 2, lambda i, x: (i + 1, x * 0.5), [0, net])
        return tf.reduce_mean(net)


def fast_convs_slow_steps(tmp_path, ms_of, **options):
    """Convs 4x faster alone (the search lowers them), whole steps timed by ``ms_of``: the rewrite's report."""
    return measured_rewrite(conv_chain(3)[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(4.0, 1.0)}),
                            measure_steps=FakeSteps(ms_of), **options)


CONFIG = PaintConfig(tf.bfloat16, default_classes(tf.bfloat16), [], "CPU")


def small_net(dropout=True):
    """conv + batch norm (with its update ops) + dropout + fc + cross-entropy; returns (graph, loss, feeds)."""
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(0)
        images = tf1.placeholder(tf.float32, [4, 8, 8, 3], name="images")
        labels = tf1.placeholder(tf.int64, [4], name="labels")
        net = slim.conv2d(images, 6, [3, 3], normalizer_fn=slim.batch_norm,
                          normalizer_params={"is_training": True}, scope="conv")
        net = slim.flatten(net)
        if dropout:
            net = slim.dropout(net, 0.5, is_training=True)
        logits = slim.fully_connected(net, 5, activation_fn=None, scope="logits")
        loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    rng = np.random.RandomState(0)
    feeds = {images: rng.uniform(-1, 1, [4, 8, 8, 3]).astype(np.float32), labels: np.array([0, 1, 2, 3])}
    return graph, loss, feeds


def copy_of(graph, loss):
    with graph.as_default():
        region = select_region([loss, tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)])
        return copy_region(region, [loss])


def allow_names(copy):
    return frozenset(node.name for node in copy.graph_def.node if node.op in ("Conv2D", "MatMul"))
