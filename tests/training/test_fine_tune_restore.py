"""Fine-tuning initialisation: exclude scopes, casting float16 checkpoints, clear errors for misfits."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

from argument_errors import raises_naming
from slim_mp.train_dir.checkpoint_folder import resolve_checkpoint
from slim_mp.training.fine_tune_restore import fine_tune_init_fn

tf1 = tf.compat.v1
RNG = np.random.default_rng(5)
BODY = RNG.normal(size=(4, 3)).astype(np.float32)
HEAD = RNG.normal(size=(3, 2)).astype(np.float32)


def build_model(head_units: int = 2) -> None:
    """Two slim layers, ``net/body`` and ``net/logits``, with zero initial weights."""
    inputs = tf.zeros([1, 4])
    with tf1.variable_scope("net"):
        hidden = slim.fully_connected(inputs, 3, weights_initializer=tf.zeros_initializer(), scope="body")
        slim.fully_connected(hidden, head_units, weights_initializer=tf.zeros_initializer(), scope="logits")


def write_checkpoint(directory: str, dtype=tf.float32) -> str:
    """Save a checkpoint with the model's variable names holding BODY/HEAD (and zero biases) in ``dtype``."""
    values = {
        "net/body/weights": BODY, "net/body/biases": np.zeros(3, np.float32),
        "net/logits/weights": HEAD, "net/logits/biases": np.zeros(2, np.float32),
    }
    with tf.Graph().as_default():
        variables = [tf1.Variable(tf.constant(value, dtype), name=name) for name, value in values.items()]
        saver = tf1.train.Saver(variables)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            return saver.save(session, os.path.join(directory, "pretrained.ckpt"))


def restored_values(checkpoint: str, head_units: int = 2, **kwargs) -> dict:
    """Build the model, run the fine-tune init function; return the model variables by name."""
    with tf.Graph().as_default():
        build_model(head_units)
        init_fn = fine_tune_init_fn(checkpoint, **kwargs)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            init_fn(session)
            return {v.op.name: session.run(v) for v in slim.get_model_variables()}


def test_float32_checkpoint_restores_all_model_variables(tmp_path):
    values = restored_values(write_checkpoint(str(tmp_path)))
    np.testing.assert_array_equal(values["net/body/weights"], BODY)
    np.testing.assert_array_equal(values["net/logits/weights"], HEAD)


def test_exclude_scopes_leave_those_variables_at_their_initial_values(tmp_path):
    values = restored_values(write_checkpoint(str(tmp_path)), exclude_scopes=("net/logits",))
    np.testing.assert_array_equal(values["net/body/weights"], BODY)
    np.testing.assert_array_equal(values["net/logits/weights"], np.zeros_like(HEAD))


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16])
def test_half_precision_checkpoint_restores_by_casting(tmp_path, dtype):
    values = restored_values(write_checkpoint(str(tmp_path), dtype))
    reference = tf.cast(tf.constant(BODY), dtype).numpy().astype(np.float32)  # what the checkpoint holds
    assert values["net/body/weights"].dtype == np.float32
    np.testing.assert_array_equal(values["net/body/weights"], reference)
    np.testing.assert_allclose(values["net/body/weights"], BODY, rtol=1e-2)  # bfloat16 keeps 8 bits


def test_shape_mismatch_lists_the_variables_and_names_the_flag(tmp_path):
    checkpoint = write_checkpoint(str(tmp_path))
    with pytest.raises(ValueError) as error:
        restored_values(checkpoint, head_units=5)
    message = str(error.value)
    assert "net/logits/weights (checkpoint [3, 2] float32, model [3, 5] float32)" in message
    assert "net/logits/biases (checkpoint [2] float32, model [5] float32)" in message
    assert "--checkpoint_exclude_scopes=net/logits" in message
    assert "net/body" not in message


def test_missing_variables_fail_unless_ignored(tmp_path):
    with tf.Graph().as_default():
        tf1.Variable(tf.constant(BODY), name="net/body/weights")
        saver = tf1.train.Saver()
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            checkpoint = saver.save(session, str(tmp_path / "partial.ckpt"))
    with pytest.raises(ValueError, match="lacks 3 model variable.*--ignore_missing_vars"):
        restored_values(checkpoint)
    values = restored_values(checkpoint, ignore_missing_vars=True)
    np.testing.assert_array_equal(values["net/body/weights"], BODY)
    np.testing.assert_array_equal(values["net/logits/weights"], np.zeros_like(HEAD))


def test_a_checkpoint_in_train_dir_wins_over_checkpoint_path(tmp_path):
    checkpoint = write_checkpoint(str(tmp_path))
    with tf.Graph().as_default():
        build_model()
        assert fine_tune_init_fn(checkpoint, train_dir=str(tmp_path)) is None
        assert fine_tune_init_fn(checkpoint, train_dir=str(tmp_path / "fresh")) is not None


def test_folders_resolve_to_their_latest_checkpoint_and_bad_paths_name_the_flag(tmp_path):
    checkpoint = write_checkpoint(str(tmp_path))
    assert resolve_checkpoint(str(tmp_path)) == checkpoint
    empty_dir = tmp_path / "empty_dir"
    empty_dir.mkdir()
    with raises_naming("--checkpoint_path=.*without a checkpoint"):
        resolve_checkpoint(str(empty_dir))
    with raises_naming("--checkpoint_path=.*not a readable checkpoint"):
        resolve_checkpoint(str(tmp_path / "nope.ckpt"))
