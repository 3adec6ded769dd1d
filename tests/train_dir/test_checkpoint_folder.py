"""The checkpoint folder: the survey reads only, the resume pick repairs the state file, step 0 is a step."""

import os
import shutil

import numpy as np
import tensorflow as tf

from argument_errors import raises_naming
from slim_mp.train_dir.checkpoint_folder import find_resume_checkpoint, survey_checkpoints
from slim_mp.train_dir.checkpoint_save import atomic_save
from slim_mp.train_dir.checkpoint_state import STATE_FILENAME, read_state, step_key

tf1 = tf.compat.v1


def save_steps(train_dir: str, steps) -> None:
    """Save a one-variable graph at each of ``steps`` into ``train_dir`` (the variable holds the step)."""
    graph = tf.Graph()
    with graph.as_default():
        value = tf1.Variable(0.0, name="value")
        saver = tf1.train.Saver(max_to_keep=None)
        with tf1.Session(graph=graph) as session:
            for step in steps:
                session.run(value.assign(float(step)))
                atomic_save(saver, session, train_dir, step)


def folder_contents(train_dir: str) -> dict:
    """{file name: bytes} of everything in ``train_dir``."""
    contents = {}
    for name in sorted(os.listdir(train_dir)):
        with open(os.path.join(train_dir, name), "rb") as handle:
            contents[name] = handle.read()
    return contents


def test_step_zero_orders_after_names_without_a_step_and_before_step_one():
    assert step_key("model.ckpt-0") == 0
    assert step_key("model.ckpt") < step_key("model.ckpt-0") < step_key("model.ckpt-1")


def test_an_interrupted_save_at_step_zero_is_ignored_not_called_damage(tmp_path):
    """A run killed while writing its 0-step (parity) save leaves a data file, no index, no state file:
    that is an interrupted save, and the next run starts from scratch instead of failing."""
    saved, train_dir = tmp_path / "saved", tmp_path / "train"
    saved.mkdir()
    train_dir.mkdir()
    save_steps(str(saved), [0])
    (data_file,) = [name for name in os.listdir(saved) if name.startswith("model.ckpt-0.data-")]
    shutil.copy(saved / data_file, train_dir / data_file)
    assert find_resume_checkpoint(str(train_dir)) is None
    assert survey_checkpoints(str(train_dir)).damaged == ()


def test_a_damaged_index_of_step_zero_is_still_damage(tmp_path):
    """The interrupted-save rule covers only files without an index: a listed, broken step 0 is named."""
    save_steps(str(tmp_path), [0])
    with open(tmp_path / "model.ckpt-0.index", "wb") as handle:
        handle.write(b"not an index")
    with raises_naming(r"--train_dir=.* holds checkpoints but none is intact: model\.ckpt-0\.index is damaged"):
        find_resume_checkpoint(str(tmp_path))


def test_the_survey_changes_nothing_and_the_resume_pick_rewrites_the_damaged_state_file(tmp_path):
    train_dir = str(tmp_path)
    save_steps(train_dir, [0, 3])
    with open(os.path.join(train_dir, STATE_FILENAME), "w", encoding="utf-8") as handle:
        handle.write("garbage {")
    before = folder_contents(train_dir)
    survey = survey_checkpoints(train_dir)
    assert survey.chosen == "model.ckpt-3" and survey.state_problem is not None
    assert folder_contents(train_dir) == before
    assert find_resume_checkpoint(train_dir) == os.path.join(train_dir, "model.ckpt-3")
    assert read_state(train_dir) == (["model.ckpt-0", "model.ckpt-3"], None)
    np.testing.assert_equal(tf.train.load_checkpoint(os.path.join(train_dir, "model.ckpt-3")).get_tensor("value"), 3.0)
