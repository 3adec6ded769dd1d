"""The placement's timing graphs (``timing_graphs``): variables standing in for inputs, and their values."""

import numpy as np
import tensorflow as tf

from slim_mp.graph_pass.placement import timing_graphs


def test_variables_start_at_their_initial_values_and_load_new_ones():
    graph = tf.Graph()
    with graph.as_default():
        read = timing_graphs.variable_of(tf.fill([2, 3], 1.5))
        labels = timing_graphs.random_variable([4], tf.int64)
        init = timing_graphs.variables_initializer()
    assert read.op.type == "ReadVariableOp" and not graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        np.testing.assert_array_equal(session.run(read), np.full([2, 3], 1.5, np.float32))
        np.testing.assert_array_equal(session.run(labels), np.zeros([4], np.int64))
        timing_graphs.load_variables(session, {read: np.arange(6, dtype=np.float32).reshape(2, 3)})
        np.testing.assert_array_equal(session.run(read), np.arange(6).reshape(2, 3))
        np.testing.assert_array_equal(session.run(labels), np.zeros([4], np.int64))


def test_random_variables_repeat_one_block_of_small_normals_and_integers_start_at_zero():
    size = timing_graphs.RANDOM_BLOCK_SIZE
    graph = tf.Graph()
    with graph.as_default():
        large = timing_graphs.random_variable([3, size], tf.float32)
        odd = timing_graphs.random_variable([7, 5], tf.bfloat16)
        labels = timing_graphs.random_variable([4], tf.int32)
        init = timing_graphs.variables_initializer()
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(init)
        values, odd_values, label_values = session.run([large, tf.cast(odd, tf.float32), labels])
    assert values.shape == (3, size) and odd_values.shape == (7, 5)
    np.testing.assert_array_equal(values[0], values[1], "the block repeats")
    # N(0, 0.1^2) over 4099 draws: the standard deviation within 10% of 0.1, the mean within 0.01.
    assert abs(values[0].std() - 0.1) < 0.01 and abs(values[0].mean()) < 0.01
    np.testing.assert_allclose(odd_values.ravel(), values.ravel()[:35], rtol=1e-2, atol=1e-3)
    np.testing.assert_array_equal(label_values, np.zeros([4], np.int32))
    assert len(graph.get_collection("slim_mp_placement_random_block")) == 1, "one block per graph"
