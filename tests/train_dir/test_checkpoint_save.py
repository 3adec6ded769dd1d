"""Atomic checkpoints: a save that fails, or a run killed mid-save, leaves the previous checkpoint usable."""

import os
import re

import numpy as np
import pytest
import tensorflow as tf

from slim_mp.train_dir.checkpoint_save import atomic_save
from slim_mp.train_dir.checkpoint_state import MAX_TO_KEEP, TEMP_DIR_PREFIX

tf1 = tf.compat.v1


def make_graph():
    """Two variables and a saver over both; returns (graph, weight, other, saver)."""
    graph = tf.Graph()
    with graph.as_default():
        weight = tf1.Variable(tf.constant([1.0, 2.0]), name="weight")
        other = tf1.Variable(tf.constant(7.0), name="other")
        saver = tf1.train.Saver(max_to_keep=None)
    return graph, weight, other, saver


def load_weight(checkpoint: str) -> np.ndarray:
    return tf.train.load_checkpoint(checkpoint).get_tensor("weight")


def test_a_save_that_fails_midway_leaves_the_previous_checkpoint_latest_and_loadable(tmp_path):
    train_dir = str(tmp_path)
    graph, weight, other, saver = make_graph()
    with graph.as_default(), tf1.Session(graph=graph) as session:
        session.run(tf1.global_variables_initializer())
        first = atomic_save(saver, session, train_dir, 1)
    with graph.as_default(), tf1.Session(graph=graph) as session:
        session.run(weight.initializer)  # `other` stays uninitialised: the next save fails while writing
        session.run(weight.assign([5.0, 6.0]))
        with pytest.raises(tf.errors.FailedPreconditionError):
            atomic_save(saver, session, train_dir, 2)
    assert tf.train.latest_checkpoint(train_dir) == first
    np.testing.assert_array_equal(load_weight(first), [1.0, 2.0])
    assert not [name for name in os.listdir(train_dir) if name.startswith(TEMP_DIR_PREFIX)]


def test_files_left_by_a_killed_save_are_ignored_and_cleaned_up(tmp_path):
    train_dir = str(tmp_path)
    graph, weight, _, saver = make_graph()
    with graph.as_default(), tf1.Session(graph=graph) as session:
        session.run(tf1.global_variables_initializer())
        first = atomic_save(saver, session, train_dir, 1)
        # What a kill between moving the data file and the index of step 2 leaves behind:
        data_file = next(name for name in os.listdir(train_dir) if ".data-" in name)
        with open(os.path.join(train_dir, data_file.replace("-1.", "-2.")), "wb") as handle:
            handle.write(b"partial")
        os.makedirs(os.path.join(train_dir, TEMP_DIR_PREFIX + "stale"))
        assert tf.train.latest_checkpoint(train_dir) == first
        session.run(weight.assign([3.0, 4.0]))
        second = atomic_save(saver, session, train_dir, 2)
    assert tf.train.latest_checkpoint(train_dir) == second
    np.testing.assert_array_equal(load_weight(second), [3.0, 4.0])
    assert not [name for name in os.listdir(train_dir) if name.startswith(TEMP_DIR_PREFIX)]


def test_only_the_last_checkpoints_are_kept_and_listed_relative(tmp_path):
    train_dir = str(tmp_path)
    graph, _, _, saver = make_graph()
    with graph.as_default(), tf1.Session(graph=graph) as session:
        session.run(tf1.global_variables_initializer())
        for step in range(MAX_TO_KEEP + 2):
            atomic_save(saver, session, train_dir, step)
    state = tf.train.get_checkpoint_state(train_dir)
    kept = [os.path.basename(path) for path in state.all_model_checkpoint_paths]
    assert kept == [f"model.ckpt-{step}" for step in range(2, MAX_TO_KEEP + 2)]
    deleted = ("model.ckpt-0.", "model.ckpt-1.")
    assert not any(name.startswith(deleted) for name in os.listdir(train_dir))
    with open(os.path.join(train_dir, "checkpoint"), encoding="utf-8") as handle:
        assert str(tmp_path) not in handle.read()  # relative paths: the folder can be moved


@pytest.mark.parametrize("max_to_keep, kept_steps", [(1, [4]), (2, [3, 4]), (0, [0, 1, 2, 3, 4])])
def test_max_to_keep_keeps_the_newest_listed_and_on_disk_and_zero_keeps_every_one(tmp_path, max_to_keep, kept_steps):
    """As tf.compat.v1.train.Saver(max_to_keep=...): the newest N stay; 0 deletes none."""
    train_dir = str(tmp_path)
    graph, _, _, saver = make_graph()
    with graph.as_default(), tf1.Session(graph=graph) as session:
        session.run(tf1.global_variables_initializer())
        for step in range(5):
            atomic_save(saver, session, train_dir, step, max_to_keep)
    kept = [f"model.ckpt-{step}" for step in kept_steps]
    state = tf.train.get_checkpoint_state(train_dir)
    assert [os.path.basename(path) for path in state.all_model_checkpoint_paths] == kept
    on_disk = {re.match(r"model\.ckpt-\d+", name).group(0) for name in os.listdir(train_dir)
               if name.startswith("model.ckpt")}
    assert sorted(on_disk) == sorted(kept)


def test_a_relative_train_dir_names_its_checkpoints_so_the_latest_is_found(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    graph, _, _, saver = make_graph()
    with graph.as_default(), tf1.Session() as session:
        session.run(tf1.global_variables_initializer())
        os.makedirs(os.path.join("runs", "relative"))
        atomic_save(saver, session, os.path.join("runs", "relative"), 5)
    assert tf.train.latest_checkpoint(os.path.join("runs", "relative")) == os.path.join("runs", "relative",
                                                                                        "model.ckpt-5")
    with open(os.path.join("runs", "relative", "checkpoint"), encoding="utf-8") as state:
        assert 'model_checkpoint_path: "model.ckpt-5"' in state.read()
