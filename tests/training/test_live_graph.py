"""The graph written to the events file and to each ``.meta``: the live rewritten graph, each converted op once.

After the mixed-precision pass the float32 originals of the converted ops stay in the ``tf.Graph``
unread; TensorBoard and the ``.meta`` must not carry them, and the ``.meta`` must still import,
restore and train.
"""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from slim_mp.datasets.fashion_mnist import load_bundled
from slim_mp.graph_pass.rewrite import rewrite
from slim_mp.training.live_graph import live_graph_def, reachable_graph_def
from slim_mp.training.loop import train
from slim_mp.training.precision_flags import PrecisionOptions
from train_configs import lenet_config

tf1 = tf.compat.v1
STEPS = 2
LENET_CONVOLUTIONS = ("LeNet/conv1/Conv2D", "LeNet/conv2/Conv2D")


def graph_def_of_events(train_dir: str) -> tf1.GraphDef:
    (events_file,) = glob.glob(os.path.join(train_dir, "events.out.tfevents.*"))
    graphs = [event.graph_def for event in tf1.train.summary_iterator(events_file) if event.graph_def]
    assert len(graphs) == 1
    graph_def = tf1.GraphDef()
    graph_def.ParseFromString(graphs[0])
    return graph_def


def assert_each_convolution_once_in_bfloat16(graph_def: tf1.GraphDef) -> None:
    convolutions = {node.name: node for node in graph_def.node if node.op == "Conv2D"}
    assert sorted(convolutions) == [f"{name}_bf16" for name in LENET_CONVOLUTIONS]  # no float32 original beside it
    assert all(node.attr["T"].type == tf.bfloat16.as_datatype_enum for node in convolutions.values())


@pytest.fixture(scope="module")
def bfloat16_run(tmp_path_factory) -> str:
    train_dir = str(tmp_path_factory.mktemp("live_graph"))
    config = lenet_config(train_dir, max_number_of_steps=STEPS, save_summaries_secs=0,
                          precision_options=PrecisionOptions("bfloat16", mp_placement="static"))
    train(config, print_line=lambda line: None)
    return train_dir


def test_tensorboard_graph_shows_each_converted_op_once(bfloat16_run):
    assert_each_convolution_once_in_bfloat16(graph_def_of_events(bfloat16_run))


def test_meta_graph_is_live_and_imports_restores_and_trains_on(bfloat16_run):
    checkpoint = tf.train.latest_checkpoint(bfloat16_run)
    images, labels = load_bundled("train")
    with tf.Graph().as_default() as graph:
        saver = tf1.train.import_meta_graph(checkpoint + ".meta")
        assert_each_convolution_once_in_bfloat16(graph.as_graph_def())
        with tf1.Session() as session:
            saver.restore(session, checkpoint)
            session.run("MakeIterator", {"fed_images:0": images[..., np.newaxis], "fed_labels:0": labels})
            before = session.run("LeNet/conv1/weights/Read/ReadVariableOp:0")
            losses = [session.run("train_op:0") for _ in range(STEPS)]
            after, step = session.run(["LeNet/conv1/weights/Read/ReadVariableOp:0",
                                       "global_step/Read/ReadVariableOp:0"])
    assert step == 2 * STEPS  # restored at STEPS, then STEPS more
    assert np.all(np.isfinite(losses))
    assert not np.array_equal(before, after)


def test_live_graph_drops_only_the_replaced_originals_and_what_only_they_read():
    with tf.Graph().as_default() as graph:
        images = tf1.placeholder(tf.float32, [2, 8, 8, 3], name="images")
        kernel = tf1.get_variable("kernel", [3, 3, 3, 4], use_resource=True)
        conv = tf.nn.conv2d(images, kernel, 1, "SAME", name="conv")
        loss = tf.reduce_sum(tf.nn.relu(conv), name="loss")
        tf.no_op(name="unread_sink")  # nothing consumes it, like a train op or an initializer
        report = rewrite(loss, "bfloat16", placement="static")
    names = {node.name for node in live_graph_def(graph, [report]).node}
    assert "conv" in {op.name for op in graph.get_operations()}  # the original is still in the tf.Graph
    assert "conv" not in names and "conv_bf16" in names
    assert {"loss_bf16", "unread_sink", "kernel", "images"} <= names  # the reduction runs in bfloat16 too
    assert {node.name for node in live_graph_def(graph, []).node} == {op.name for op in graph.get_operations()}


def test_reachable_nodes_are_what_tensorflows_extract_sub_graph_keeps():
    """The oracle: TensorFlow's own (deprecated) ``extract_sub_graph``, on control inputs, a second output and a
    function."""

    @tf.function
    def double(tensor):
        return 2.0 * tensor

    with tf.Graph().as_default() as graph:
        values = tf1.placeholder(tf.float32, [4], name="values")
        top, indices = tf.math.top_k(values, 2, name="top")  # "top:1" is read below
        with tf.control_dependencies([tf.no_op(name="first")]):
            total = tf.add(top, tf.cast(indices, tf.float32), name="total")
        sinks = [double(total).op.name]
        tf.identity(values, name="unreached")
    graph_def = graph.as_graph_def()
    reached = reachable_graph_def(graph_def, sinks)
    assert reached == tf1.graph_util.extract_sub_graph(graph_def, sinks)
    names = {node.name for node in reached.node}
    assert "first" in names and "unreached" not in names and len(reached.library.function) == 1
