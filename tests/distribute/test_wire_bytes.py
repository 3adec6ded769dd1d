"""The bytes a traced step moves between a parameter server and a worker, against the tensors' own sizes."""


import numpy as np
import pytest
import tensorflow as tf

from loopback_servers import loopback_cluster
from slim_mp.distribute import IncompleteTraceError, task_of, traced_wire_traffic, wire_traffic

tf1 = tf.compat.v1
ROWS, COLUMNS, BATCH = 256, 128, 4
WEIGHT_BYTES = ROWS * COLUMNS * np.dtype(np.float32).itemsize
PS_TASK, WORKER_TASK = "/job:ps/task:0", "/job:worker/task:0"


@pytest.fixture(scope="module")
def cluster():
    """One parameter server and one worker on fresh loopback ports: (layout, session target)."""
    return loopback_cluster()


def _train_graph(layout, cast_weight_on_ps: bool):
    """SGD on a matrix product whose weight lives on the ps, read in bfloat16 or float32 by the worker.

    Returns (graph, train op, initializer, feeds).
    """
    graph = tf.Graph()
    with graph.as_default(), graph.device(layout.device_setter()):
        weight = tf1.get_variable("weight", [ROWS, COLUMNS], initializer=tf1.ones_initializer(), use_resource=True)
        inputs = tf1.placeholder(tf.float32, [BATCH, ROWS])
        if cast_weight_on_ps:
            with tf.device(weight.device):
                low_weight = tf.cast(weight, tf.bfloat16)
            outputs = tf.cast(tf.matmul(tf.cast(inputs, tf.bfloat16), low_weight), tf.float32)
        else:
            outputs = tf.matmul(inputs, weight)
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(outputs * outputs))
        initialize = tf1.global_variables_initializer()
    return graph, train, initialize, {inputs: np.ones([BATCH, ROWS], np.float32)}


def _one_step_traffic(layout, target, cast_weight_on_ps: bool):
    """The traffic of one traced step of ``_train_graph``."""
    graph, train, initialize, feeds = _train_graph(layout, cast_weight_on_ps)
    with tf1.Session(target, graph=graph) as session:
        session.run(initialize)
        return traced_wire_traffic(session, train, feeds)


def test_a_steps_bytes_are_the_weight_one_way_and_its_gradient_the_other(cluster):
    traffic = _one_step_traffic(*cluster, cast_weight_on_ps=False)
    assert traffic.sent_by(PS_TASK) == WEIGHT_BYTES
    # The gradient, and the learning rate (a float32 constant made on the worker).
    assert traffic.sent_by(WORKER_TASK) == WEIGHT_BYTES + 4
    assert traffic.received_by(PS_TASK) == traffic.sent_by(WORKER_TASK)
    assert traffic.across(WORKER_TASK) == 2 * WEIGHT_BYTES + 4
    assert {(route.source_task, route.destination_task) for route in traffic.routes} == {
        ("/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"),
        ("/job:worker/replica:0/task:0", "/job:ps/replica:0/task:0")}


def test_a_cast_on_the_parameter_servers_side_halves_what_the_worker_receives(cluster):
    traffic = _one_step_traffic(*cluster, cast_weight_on_ps=True)
    assert traffic.sent_by(PS_TASK) == WEIGHT_BYTES // 2
    assert traffic.as_json()["routes"][0]["bytes"] in (WEIGHT_BYTES // 2, traffic.sent_by(WORKER_TASK))


def test_every_traced_step_counts_every_tensor_that_crossed(cluster):
    # TensorFlow turns the parameter server's logging on without waiting: about one traced step in eight on
    # loopback recorded nothing the ps received. Twenty steps in a row must each count the gradient.
    layout, target = cluster
    graph, train, initialize, feeds = _train_graph(layout, cast_weight_on_ps=False)
    with tf1.Session(target, graph=graph) as session:
        session.run(initialize)
        for _ in range(20):
            assert traced_wire_traffic(session, train, feeds).received_by(PS_TASK) == WEIGHT_BYTES + 4


@pytest.mark.executed_ops
def test_a_trace_that_missed_what_a_task_received_is_refused(cluster):
    layout, target = cluster
    graph, train, initialize, feeds = _train_graph(layout, cast_weight_on_ps=False)
    options = tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE, output_partition_graphs=True)
    run_metadata = tf1.RunMetadata()
    with tf1.Session(target, graph=graph) as session:
        session.run(initialize)
        session.run(train, feeds, options=options, run_metadata=run_metadata)
    for device_stats in run_metadata.step_stats.dev_stats:
        kept = [stats for stats in device_stats.node_stats
                if not (stats.node_name == "RecvTensor" and " to /job:ps/" in stats.timeline_label)]
        del device_stats.node_stats[:]
        device_stats.node_stats.extend(kept)
    with pytest.raises(IncompleteTraceError, match="crossed from /job:worker/replica:0/task:0 to /job:ps"):
        wire_traffic(run_metadata)


@pytest.mark.executed_ops
def test_a_single_process_sends_nothing_and_an_untraced_step_is_refused():
    with tf.Graph().as_default() as graph:
        total = tf.reduce_sum(tf.ones([8]))
    with tf1.Session(graph=graph) as session:
        assert traced_wire_traffic(session, total).routes == ()
        with pytest.raises(ValueError, match="output_partition_graphs"):
            wire_traffic(tf1.RunMetadata())


def test_a_device_names_its_task():
    assert task_of("/job:ps/replica:0/task:3/device:CPU:0") == "/job:ps/replica:0/task:3"
    assert task_of("/device:CPU:0") == "/device:CPU:0"
