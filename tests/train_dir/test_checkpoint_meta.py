"""Checkpoints carry their .meta graph (as official slim's do) and still appear all at once or not at all."""

import os

import numpy as np
import pytest
import tensorflow as tf

from slim_mp.train_dir.checkpoint_save import atomic_save

tf1 = tf.compat.v1


def test_meta_graph_is_saved_loadable_and_absent_after_a_failed_save(tmp_path):
    train_dir = str(tmp_path)
    graph = tf.Graph()
    with graph.as_default():
        weight = tf1.Variable([1.0, 2.0], name="weight")
        tf1.Variable(7.0, name="other")
        saver = tf1.train.Saver(max_to_keep=None)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            first = atomic_save(saver, session, train_dir, 1)
        with tf1.Session() as session:
            session.run(weight.initializer)  # `other` uninitialised: the save of step 2 fails while writing
            with pytest.raises(tf.errors.FailedPreconditionError):
                atomic_save(saver, session, train_dir, 2)
    assert sorted(os.listdir(train_dir)) == [
        "checkpoint", "model.ckpt-1.data-00000-of-00001", "model.ckpt-1.index", "model.ckpt-1.meta",
    ]
    with tf.Graph().as_default():
        loader = tf1.train.import_meta_graph(first + ".meta")
        with tf1.Session() as session:
            loader.restore(session, first)
            restored = session.run(next(v for v in tf1.global_variables() if v.op.name == "weight"))
    np.testing.assert_array_equal(restored, [1.0, 2.0])
