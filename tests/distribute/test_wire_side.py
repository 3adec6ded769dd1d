"""A user's graph under ``replica_device_setter``, rewritten to bfloat16: bfloat16 crosses the wire, and nothing else
changes.

The oracles are TensorFlow's: the bytes a traced step's receivers record (``traced_wire_traffic``), the float32
graph's bytes for the same network, and the same graph run in one process with its devices cleared (the same
kernels on the same inputs, so the same bits).
"""

from typing import Callable, Dict, List, Tuple

import numpy as np
import pytest
import tensorflow as tf
from nets import nets_factory

import slim_mp
from slim_mp.distribute import (ClusterLayout, form_worker_fusions, make_cluster_layout, traced_wire_traffic)
from loopback_servers import loopback_cluster
from slim_mp.loss_scale import (ExponentialUpdateLossScaleManager, FixedLossScaleManager, LossScaleManager,
                               LossScaleOptimizer)

tf1 = tf.compat.v1
WORKER_TASK = "/job:worker/task:0"
# Issue 52's bound: a bfloat16 step's bytes across the wire against a float32 step's.
MAX_BYTES_RATIO = 0.55
# CifarNet (with its weight decay) at its own 32 px: ~1.75 M weights, so the weights dominate the bytes.
NETWORK, IMAGE_SIZE, BATCH, CLASSES = "cifarnet", 32, 2, 10
# The train script's default weight decay: TF-Slim's layers (Keras-style underneath) add an L2Loss of each weight,
# placed by the device function, not with the weight.
WEIGHT_DECAY = 0.00004


@pytest.fixture(scope="module")
def cluster() -> Tuple[ClusterLayout, str]:
    """One parameter server and one worker on fresh loopback ports: (layout, session target)."""
    return loopback_cluster()


def _fixed_scale() -> LossScaleManager:
    return FixedLossScaleManager(128.0)


def _train_graph(layout: ClusterLayout, precision: str, make_manager: Callable[[], LossScaleManager] = _fixed_scale,
                 loss_multiplier: float = 1.0) -> Tuple[tf.Graph, tf.Operation, LossScaleOptimizer]:
    """A user's CifarNet step under ``layout``'s device setter: rewrite (static painting), then a loss-scale
    optimizer's ``minimize`` (gradients not colocated, TensorFlow's default). (graph, train op, optimizer)."""
    graph = tf.Graph()
    with graph.as_default(), tf1.device(layout.device_setter()):
        tf1.set_random_seed(0)
        rng = np.random.RandomState(0)
        images = tf.constant(rng.uniform(-1, 1, [BATCH, IMAGE_SIZE, IMAGE_SIZE, 3]).astype(np.float32))
        labels = tf.constant(rng.randint(0, CLASSES, [BATCH]).astype(np.int64))
        logits, _ = nets_factory.get_network_fn(NETWORK, CLASSES, weight_decay=WEIGHT_DECAY, is_training=True)(images)
        tf1.losses.sparse_softmax_cross_entropy(labels, logits, weights=loss_multiplier)
        loss = tf1.losses.get_total_loss()
        if precision != "float32":
            slim_mp.rewrite(loss, precision, placement="static")
        optimizer = LossScaleOptimizer(tf1.train.MomentumOptimizer(0.01, 0.9), make_manager())
        train = optimizer.minimize(loss)
        if layout.distributed:
            form_worker_fusions(graph)
    return graph, train, optimizer


def _one_step(graph: tf.Graph, train: tf.Operation, layout: ClusterLayout, target: str,
              trace: bool = False) -> Tuple[Dict[str, np.ndarray], object]:
    """Initialize, run one step (traced: its wire traffic); the trainable variables' values after it, the traffic."""
    with graph.as_default():
        initialize = tf1.global_variables_initializer()
        values = {v.op.name: v.read_value() for v in tf1.trainable_variables()}
    with tf1.Session(target, graph=graph, config=layout.session_config()) as session:
        session.run(initialize)
        traffic = traced_wire_traffic(session, train) if trace else session.run(train)
        return session.run(values), traffic


def _one_step_in_process(graph: tf.Graph, train: tf.Operation) -> Dict[str, np.ndarray]:
    """``_one_step`` of ``graph`` with every device and colocation cleared, run in this process."""
    with graph.as_default():
        initialize = tf1.global_variables_initializer()
        values = {v.op.name: v.read_value().name for v in tf1.trainable_variables()}
    graph_def = graph.as_graph_def()
    for node in [*graph_def.node, *(node for function in graph_def.library.function for node in function.node_def)]:
        node.device = ""
        node.attr.pop("_class", None)
    with tf.Graph().as_default() as copy:
        tf.graph_util.import_graph_def(graph_def, name="")
    with tf1.Session(graph=copy) as session:
        session.run(initialize.name)
        session.run(train.name)
        return session.run(values)


def _weight_casts(graph: tf.Graph) -> List[tf.Operation]:
    return [op for op in graph.get_operations() if op.type == "Cast" and op.inputs[0].op.type == "ReadVariableOp"
            and op.outputs[0].dtype == tf.bfloat16 and not op.name.startswith("gradients/")]


def test_a_bfloat16_step_sends_about_half_the_bytes_of_a_float32_step(cluster):
    layout, target = cluster
    float32_traffic = _one_step(*_train_graph(layout, "float32")[:2], layout, target, trace=True)[1]
    graph, train, _ = _train_graph(layout, "bfloat16")
    bfloat16_traffic = _one_step(graph, train, layout, target, trace=True)[1]
    assert bfloat16_traffic.across(WORKER_TASK) <= MAX_BYTES_RATIO * float32_traffic.across(WORKER_TASK), (
        bfloat16_traffic.as_json(), float32_traffic.as_json())
    # Against the weights' own size: the worker receives each weight once, in bfloat16 (a float32 step receives
    # some twice: its layer's read and its weight decay's).
    weights = graph.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES)
    float32_weight_bytes = sum(weight.shape.num_elements() * 4 for weight in weights)
    assert bfloat16_traffic.received_by(WORKER_TASK) <= MAX_BYTES_RATIO * float32_weight_bytes
    decays = [op for op in graph.get_operations() if op.type == "L2Loss"]
    assert decays and all(op.device == "/job:ps/task:0" for op in decays), [(op.name, op.device) for op in decays]
    casts = _weight_casts(graph)
    assert len(casts) == len(weights)
    for cast in casts:
        assert cast.device == "/job:ps/task:0", cast.name
        # TensorFlow's gradient of the cast: the cast of the bfloat16 gradient back to float32, beside the update.
        gradient_cast = graph.get_operation_by_name(f"gradients/{cast.name}_grad/Cast")
        assert (gradient_cast.inputs[0].dtype, gradient_cast.device) == (tf.bfloat16, "/job:ps/task:0")


def test_a_cluster_step_updates_the_variables_bit_for_bit_as_the_same_graph_in_one_process(cluster):
    layout, target = cluster
    graph, train, _ = _train_graph(layout, "bfloat16")
    in_cluster = _one_step(graph, train, layout, target)[0]
    in_process = _one_step_in_process(graph, train)
    assert in_cluster.keys() == in_process.keys()
    for name, value in in_cluster.items():
        np.testing.assert_array_equal(value, in_process[name], err_msg=name)


def test_a_nonfinite_gradient_still_skips_the_update_and_lowers_the_scale_in_a_cluster(cluster):
    layout, target = cluster
    graph, train, optimizer = _train_graph(
        layout, "bfloat16", loss_multiplier=3e38,  # the loss times the scale (2) overflows float32 and bfloat16
        make_manager=lambda: ExponentialUpdateLossScaleManager(2.0, incr_every_n_steps=1000,
                                                               decr_every_n_nan_or_inf=1, decr_ratio=0.5))
    with graph.as_default():
        initialize = tf1.global_variables_initializer()
        variables = tf1.trainable_variables()
    with tf1.Session(target, graph=graph, config=layout.session_config()) as session:
        session.run(initialize)
        before = session.run(variables)
        session.run(train)
        after, scale, skipped = session.run([variables, optimizer.loss_scale, optimizer.skipped_steps])
    assert (scale, skipped) == (1.0, 1)
    for old, new in zip(before, after):
        np.testing.assert_array_equal(old, new)


def test_synchronous_replicas_accumulate_float32_made_on_the_parameter_server():
    layout = make_cluster_layout(task=0, worker_replicas=2, num_ps_tasks=1, ps_hosts=["ps:2222"],
                                 worker_hosts=["worker0:2222", "worker1:2222"])
    graph = tf.Graph()
    with graph.as_default(), tf1.device(layout.device_setter()):
        logits, _ = nets_factory.get_network_fn(NETWORK, CLASSES, is_training=True)(
            tf.zeros([BATCH, IMAGE_SIZE, IMAGE_SIZE, 3]))
        tf1.losses.sparse_softmax_cross_entropy(tf.zeros([BATCH], tf.int64), logits)
        loss = tf1.losses.get_total_loss()
        slim_mp.rewrite(loss, "bfloat16", placement="static")
        optimizer = LossScaleOptimizer(tf1.train.MomentumOptimizer(0.01, 0.9), _fixed_scale(), count_skipped_steps=True)
        tf1.train.SyncReplicasOptimizer(optimizer, 2, 2).minimize(loss, tf1.train.get_or_create_global_step())
    accumulated = [op.inputs[2] for op in graph.get_operations() if op.type == "ResourceAccumulatorApplyGradient"]
    assert len(accumulated) == len(graph.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES))
    assert {(gradient.dtype, gradient.op.device) for gradient in accumulated} == {(tf.float32, "/job:ps/task:0")}
