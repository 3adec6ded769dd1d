"""Where the step will run (``target``): the device, the session options and the cache key."""

import pytest
import tensorflow as tf

from slim_mp.graph_pass.placement import MeasuringTarget

from .fakes import conv_chain

tf1 = tf.compat.v1


def test_the_measuring_target_is_where_the_ops_are_placed_and_keys_the_cache():
    graph, loss = conv_chain()
    unplaced = graph.get_operations()
    with graph.as_default(), tf.device("/job:worker/task:0/device:GPU:1"):
        on_gpu = tf.nn.conv2d(tf.ones([1, 4, 4, 2]), tf.ones([1, 1, 2, 2]), strides=1, padding="SAME")
    gpu = MeasuringTarget().placed([on_gpu.op])
    assert gpu.device == "/job:worker/task:0/device:GPU:1"
    assert (gpu.local_device(), gpu.device_type()) == ("/device:GPU:1", "GPU"), "timing runs in this process"
    assert MeasuringTarget(device="/device:CPU:0").placed([on_gpu.op]).device_type() == "CPU", "explicit wins"
    assert MeasuringTarget().placed(unplaced).local_device() == ""
    keys = {MeasuringTarget().describe(), gpu.describe(), MeasuringTarget(training=False).describe(),
            MeasuringTarget(training=False, frozen_weights=True).describe()}
    assert len(keys) == 4, "another device, inference, or a served graph never reuses another step's timings"


def test_frozen_weights_describe_a_served_graph_not_a_training_step():
    with pytest.raises(ValueError, match="frozen_weights describes a served graph: it needs training=False"):
        MeasuringTarget(frozen_weights=True)


def test_a_cluster_sessions_grappler_options_reach_the_timing_sessions_and_the_key():
    config = tf1.ConfigProto(device_filters=["/job:ps", "/job:worker/task:0"])
    config.graph_options.rewrite_options.remapping = config.graph_options.rewrite_options.OFF
    cluster = MeasuringTarget(session_config=config)
    timing = cluster.timing_config()
    assert timing.graph_options.rewrite_options.remapping == timing.graph_options.rewrite_options.OFF
    assert not timing.device_filters, "a local timing session has no cluster jobs to filter"
    assert cluster.describe() != MeasuringTarget().describe()
    with tf.Graph().as_default() as graph:
        total = tf.reduce_sum(tf.ones([3]))
    with cluster.session(graph) as session:
        assert session.run(total) == 3.0


def test_the_micro_benchmarks_session_turns_grappler_off_on_a_cpu_only_and_keeps_the_rest():
    config = tf1.ConfigProto(intra_op_parallelism_threads=3)
    config.graph_options.rewrite_options.remapping = config.graph_options.rewrite_options.OFF
    on_cpu = MeasuringTarget(device="/device:CPU:0", session_config=config).op_timing_config()
    assert on_cpu.graph_options.rewrite_options.disable_meta_optimizer
    assert on_cpu.intra_op_parallelism_threads == 3
    assert on_cpu.graph_options.rewrite_options.remapping == on_cpu.graph_options.rewrite_options.OFF
    on_gpu = MeasuringTarget(device="/device:GPU:0").op_timing_config()
    assert not on_gpu.graph_options.rewrite_options.disable_meta_optimizer, "a GPU's layout optimizer picks kernels"
    assert not MeasuringTarget().timing_config(), "the whole steps keep the user's grappler"
