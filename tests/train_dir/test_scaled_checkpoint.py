"""write_scaled_checkpoint: named tensors multiplied, the others copied bit for bit, nothing written on bad input."""

import os

import numpy as np
import pytest
import tensorflow as tf

from slim_mp.train_dir.scaled_checkpoint import write_scaled_checkpoint

tf1 = tf.compat.v1
WEIGHTS = np.array([[0.5, -1.25], [2.0, 3.0e-3]], dtype=np.float32)
VARIANCE = np.array([0.25, 4.0], dtype=np.float32)
STEP = np.int64(7)


@pytest.fixture
def source(tmp_path) -> str:
    """A checkpoint of two float32 model tensors and an int64 step."""
    graph = tf.Graph()
    with graph.as_default():
        with tf1.variable_scope("net/conv1"):
            tf1.get_variable("weights", initializer=WEIGHTS)
            tf1.get_variable("moving_variance", initializer=VARIANCE)
        tf1.get_variable("global_step", initializer=STEP)
        saver = tf1.train.Saver()
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            return saver.save(session, str(tmp_path / "train" / "model.ckpt-7"))


def test_named_tensors_are_multiplied_and_the_others_copied(source, tmp_path):
    written = write_scaled_checkpoint(os.path.dirname(source), str(tmp_path / "big"), {"net/conv1/weights": 1e4})
    reader = tf.train.load_checkpoint(written)
    np.testing.assert_array_equal(reader.get_tensor("net/conv1/weights"),
                                  np.array([[5000.0, -12500.0], [20000.0, 30.0]], dtype=np.float32))
    np.testing.assert_array_equal(reader.get_tensor("net/conv1/moving_variance"), VARIANCE)
    assert reader.get_tensor("global_step") == STEP
    assert written == str(tmp_path / "big" / "model.ckpt")


def test_an_existing_destination_is_refused_and_kept(source, tmp_path):
    (tmp_path / "big").mkdir()
    with pytest.raises(ValueError, match="big already exists"):
        write_scaled_checkpoint(source, str(tmp_path / "big"), {"net/conv1/weights": 2.0})
    assert os.listdir(tmp_path / "big") == []


@pytest.mark.parametrize("factors, message", [
    ({"net/conv2/weights": 2.0}, "has no tensor net/conv2/weights"),
    ({"net/conv1/moving_variance": 1e38}, "overflows its float32"),
])
def test_bad_factors_name_the_tensor_and_write_nothing(source, tmp_path, factors, message):
    with pytest.raises(ValueError, match=message):
        write_scaled_checkpoint(source, str(tmp_path / "big"), factors)
    assert sorted(os.listdir(tmp_path)) == ["train"]
