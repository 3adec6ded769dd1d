"""The bytes a traced step moves between a parameter server and a worker, against the tensors' own sizes."""


import numpy as np
import pytest
import tensorflow as tf

from loopback_servers import loopback_cluster
from slim_mp.distribute import task_of, traced_wire_traffic, wire_traffic

tf1 = tf.compat.v1
ROWS, COLUMNS, BATCH = 256, 128, 4
WEIGHT_BYTES = ROWS * COLUMNS * np.dtype(np.float32).itemsize
PS_TASK, WORKER_TASK = "/job:ps/task:0", "/job:worker/task:0"


@pytest.fixture(scope="module")
def cluster():
    """One parameter server and one worker on fresh loopback ports: (layout, session target)."""
    return loopback_cluster()


def _one_step_traffic(layout, target, cast_weight_on_ps: bool):
    """One SGD step of a matrix product whose weight lives on the ps, read in bfloat16 or float32 by the worker."""
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
    with tf1.Session(target, graph=graph) as session:
        session.run(initialize)
        return traced_wire_traffic(session, train, {inputs: np.ones([BATCH, ROWS], np.float32)})


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
