"""An evaluation's one read of a checkpoint: a vanished checkpoint is told from damage and from another model."""

import glob
import os
import threading

import numpy as np
import pytest
import tensorflow as tf

from argument_errors import raises_naming
from slim_mp.config_fields import command_line_message
from slim_mp.training import checkpoint_read
from slim_mp.training.checkpoint_read import read_checkpoint_values
from slim_mp.train_dir.checkpoint_save import atomic_save

tf1 = tf.compat.v1


class Trainer:
    """A one-variable model saved with the project's atomic save; the variable holds the global step."""

    def __init__(self, train_dir: str, max_to_keep: int = 5):
        self.train_dir, self.max_to_keep = train_dir, max_to_keep
        self.graph = tf.Graph()
        with self.graph.as_default():
            self.value = tf1.Variable(0.0, name="value")
            self.step = tf1.train.get_or_create_global_step()
            self.assign = tf.group(self.value.assign(tf.cast(self.step, tf.float32) + 1.0),
                                   self.step.assign_add(1))
            self.saver = tf1.train.Saver(max_to_keep=None)
            init = tf1.global_variables_initializer()
        self.session = tf1.Session(graph=self.graph)
        self.session.run(init)

    def save_next(self) -> int:
        """One step (value and step both + 1), saved; returns the step."""
        with self.graph.as_default():  # the saver runs in its graph, not eagerly
            self.session.run(self.assign)
            step = int(self.session.run(self.step))
            atomic_save(self.saver, self.session, self.train_dir, step, self.max_to_keep)
        return step


def model_variables(shape=()) -> dict:
    """{checkpoint name: variable} of the evaluated model: ``value`` in ``shape``."""
    with tf.Graph().as_default():
        return {"value": tf1.Variable(np.zeros(shape, np.float32), name="value")}


def test_a_folder_gives_the_newest_values_and_the_step_of_the_same_checkpoint(tmp_path):
    trainer = Trainer(str(tmp_path))
    for _ in range(3):
        trainer.save_next()
    read = read_checkpoint_values(str(tmp_path), model_variables(), "eval_image_size")
    assert (read.prefix, read.global_step) == (os.path.join(str(tmp_path), "model.ckpt-3"), 3)
    np.testing.assert_equal(read.values["value"], 3.0)


def test_a_checkpoint_removed_during_its_read_is_vanished_not_damaged_nor_another_model(tmp_path):
    """The folder as the survey listed it, then the trainer's rotation deletes the checkpoint being read."""
    trainer = Trainer(str(tmp_path))
    trainer.save_next()
    before = checkpoint_read._folder_state(str(tmp_path))
    for path in glob.glob(os.path.join(str(tmp_path), "model.ckpt-1.*")):
        os.remove(path)
    inspect = checkpoint_read._inspection(model_variables(), "eval_image_size", before, {})
    with pytest.raises(checkpoint_read._Vanished):
        inspect(str(tmp_path), "model.ckpt-1")


def test_a_damaged_checkpoint_in_an_unchanged_folder_is_damage_and_the_previous_one_is_read(tmp_path):
    trainer = Trainer(str(tmp_path))
    trainer.save_next()
    trainer.save_next()
    (data_file,) = glob.glob(os.path.join(str(tmp_path), "model.ckpt-2.data-*"))
    with open(data_file, "r+b") as handle:
        handle.truncate(2)
    read = read_checkpoint_values(str(tmp_path), model_variables(), "eval_image_size")
    assert read.global_step == 1 and float(read.values["value"]) == 1.0


@pytest.mark.parametrize("variables, message", [
    ({"value": (2,)}, r"does not fit this model: value \(checkpoint \[\] float32, model \[2\] float32\); it was "
                      r"likely written with another --model_name"),
    ({"value": (), "value/ExponentialMovingAverage": ()},
     r"lacks 1 variable\(s\) of this model: value/ExponentialMovingAverage; it was likely written with another "
     r"--moving_average_decay \(the checkpoint has no moving averages\)"),
])
def test_a_readable_checkpoint_of_another_model_names_the_flag_and_is_not_retried(tmp_path, variables, message):
    Trainer(str(tmp_path)).save_next()
    with tf.Graph().as_default():
        model = {name: tf1.Variable(np.zeros(shape, np.float32), name=name.replace("/", "_"))
                 for name, shape in variables.items()}
    with raises_naming(message):
        read_checkpoint_values(str(tmp_path), model, "eval_image_size")


def test_a_named_checkpoint_removed_during_its_read_is_one_error_saying_so(tmp_path, monkeypatch):
    """The trainer's rotation deletes the checkpoint right after the evaluation looked at the folder."""
    Trainer(str(tmp_path)).save_next()
    prefix = os.path.join(str(tmp_path), "model.ckpt-1")
    real_state = checkpoint_read._folder_state
    looks = []

    def look_then_rotate(directory: str) -> tuple:
        state = real_state(directory)
        looks.append(directory)
        if len(looks) == 1:
            for path in glob.glob(prefix + ".*"):
                os.remove(path)
        return state

    monkeypatch.setattr(checkpoint_read, "_folder_state", look_then_rotate)
    with raises_naming("was removed while it was read") as raised:
        read_checkpoint_values(prefix, model_variables(), "eval_image_size")
    assert command_line_message(raised.value) == (
        f"--checkpoint_path={prefix} was removed while it was read (a training run's checkpoint rotation keeps only "
        f"its newest --max_to_keep); pass the folder {tmp_path} to evaluate its newest checkpoint."
    )


def test_reads_racing_a_trainer_that_rotates_every_save_give_one_checkpoints_values_and_step(tmp_path):
    """Every read returns a checkpoint whose value is its step (one reader), or the one rotation error."""
    trainer = Trainer(str(tmp_path), max_to_keep=1)
    trainer.save_next()
    stop = threading.Event()

    def train() -> None:
        while not stop.is_set():
            trainer.save_next()

    thread = threading.Thread(target=train)
    thread.start()
    outcomes = []
    try:
        for _ in range(30):
            try:
                read = read_checkpoint_values(str(tmp_path), model_variables(), "eval_image_size")
            except ValueError as error:
                assert "checkpoint rotation removed each checkpoint taken" in str(error), str(error)
                outcomes.append("rotation error")
                continue
            assert float(read.values["value"]) == read.global_step
            assert read.prefix.endswith(f"model.ckpt-{read.global_step}")
            outcomes.append("read")
    finally:
        stop.set()
        thread.join()
    assert len(outcomes) == 30
