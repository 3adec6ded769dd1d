"""``slim.local_variable``/``global_variable`` and ``slim.assign_from_checkpoint`` under TF 2.21 and NumPy 2.

The first two need ``variable_scope.variable`` restored; the partitioned restore needs compat's
``assign_from_checkpoint`` (tf_slim's indexes a NumPy array with a list of slices, an IndexError under
NumPy 2). References: the values written and NumPy slices of them.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

LOCAL = tf.compat.v1.GraphKeys.LOCAL_VARIABLES
GLOBAL = tf.compat.v1.GraphKeys.GLOBAL_VARIABLES


def test_local_and_global_variable_land_in_their_collections_with_their_values():
    with tf.Graph().as_default():
        local = slim.local_variable([1.0, 2.0], name="counter")
        global_ = slim.global_variable(np.eye(2, dtype=np.float32), name="matrix")
        assert local in tf.compat.v1.get_collection(LOCAL) and local not in tf.compat.v1.get_collection(GLOBAL)
        assert global_ in tf.compat.v1.get_collection(GLOBAL) and global_ not in tf.compat.v1.get_collection(LOCAL)
        assert not local.trainable and not global_.trainable
        with tf.compat.v1.Session() as session:
            session.run([tf.compat.v1.local_variables_initializer(), tf.compat.v1.global_variables_initializer()])
            np.testing.assert_array_equal(session.run(local), [1.0, 2.0])
            np.testing.assert_array_equal(session.run(global_), np.eye(2))


def _save_checkpoint(directory: str, values: dict) -> str:
    """Save plain variables holding ``values`` (name -> array); return the checkpoint path."""
    with tf.Graph().as_default():
        variables = [tf.compat.v1.get_variable(name, initializer=value) for name, value in values.items()]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.variables_initializer(variables))
            return tf.compat.v1.train.Saver(variables).save(session, f"{directory}/model.ckpt")


@pytest.mark.parametrize("as_dict", [False, True])
def test_assign_from_checkpoint_restores_partitioned_and_plain_variables(tmp_path, as_dict):
    rng = np.random.default_rng(2)
    weights = rng.normal(size=(7, 3)).astype(np.float32)
    bias = rng.normal(size=(3,)).astype(np.float32)
    path = _save_checkpoint(str(tmp_path), {"weights": weights, "bias": bias})
    with tf.Graph().as_default():
        partitioned = tf.compat.v1.get_variable(
            "weights", shape=(7, 3), initializer=tf.compat.v1.zeros_initializer(),
            partitioner=tf.compat.v1.fixed_size_partitioner(3))
        parts = list(partitioned)
        plain = tf.compat.v1.get_variable("bias", shape=(3,), initializer=tf.compat.v1.zeros_initializer())
        var_list = {"weights": parts, "bias": plain} if as_dict else parts + [plain]
        assign_op, feed_dict = slim.assign_from_checkpoint(path, var_list)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(assign_op, feed_dict)
            part_values = session.run(parts)
            np.testing.assert_array_equal(session.run(plain), bias)
    offsets = np.cumsum([0] + [value.shape[0] for value in part_values])
    assert len(part_values) == 3 and offsets[-1] == 7
    for value, start, stop in zip(part_values, offsets[:-1], offsets[1:]):
        np.testing.assert_array_equal(value, weights[start:stop])


def test_assign_from_checkpoint_names_a_missing_variable_or_skips_it_when_asked(tmp_path):
    path = _save_checkpoint(str(tmp_path), {"bias": np.ones(3, np.float32)})
    with tf.Graph().as_default():
        missing = tf.compat.v1.get_variable("other", shape=(3,))
        with pytest.raises(ValueError, match=r"missing variable \[other\]"):
            slim.assign_from_checkpoint(path, [missing])
        _, feed_dict = slim.assign_from_checkpoint(path, [missing], ignore_missing_vars=True)
        assert feed_dict == {}


def test_assign_from_checkpoint_refuses_a_shape_mismatch(tmp_path):
    path = _save_checkpoint(str(tmp_path), {"bias": np.ones(3, np.float32)})
    with tf.Graph().as_default():
        wrong = tf.compat.v1.get_variable("bias", shape=(4,))
        with pytest.raises(ValueError, match="bias"):
            slim.assign_from_checkpoint(path, [wrong])
