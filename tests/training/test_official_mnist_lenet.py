"""An official MNIST LeNet checkpoint (``LeNet/conv1/weights`` [5, 5, 1, 32]) restores into training and evaluation.

Official TF-Slim trains LeNet on the 1-channel MNIST TFRecords, so its checkpoints hold
single-channel first-layer weights. Here such a checkpoint is written from plain variables of the
official names and shapes, evaluated on MNIST-format TFRecords (compared with a float32 LeNet
written here from raw TensorFlow ops), and fine-tuned by the training library.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from datasets_support import encode_images
from slim_mp.datasets import tfrecord_format
from slim_mp.datasets.fashion_mnist import load_bundled
from slim_mp.training.evaluation import EvalConfig, evaluate
from slim_mp.training.loop import train
from train_configs import lenet_config

tf1 = tf.compat.v1
NUM_IMAGES = 64
# Official LeNet's variables on MNIST (10 classes): names and shapes.
OFFICIAL_MNIST_LENET = {
    "LeNet/conv1/weights": [5, 5, 1, 32], "LeNet/conv1/biases": [32],
    "LeNet/conv2/weights": [5, 5, 32, 64], "LeNet/conv2/biases": [64],
    "LeNet/fc3/weights": [3136, 1024], "LeNet/fc3/biases": [1024],
    "LeNet/fc4/weights": [1024, 10], "LeNet/fc4/biases": [10],
}
ACCURACY_ATOL = 1 / NUM_IMAGES  # one near-tie may flip


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory) -> str:
    """MNIST-format TFRecords (1-channel PNG, the official converter's layout) of bundled 28x28 images."""
    folder = str(tmp_path_factory.mktemp("mnist"))
    images, labels = load_bundled("test")
    encoded = encode_images([image[..., np.newaxis] for image in images[:NUM_IMAGES]], "png")
    for split in ("train", "test"):
        with tf.io.TFRecordWriter(os.path.join(folder, f"mnist_{split}.tfrecord")) as writer:
            for data, label in zip(encoded, labels[:NUM_IMAGES]):
                writer.write(tfrecord_format.encode_example(data, "png", int(label), 28, 28))
    return folder


@pytest.fixture(scope="module")
def official_checkpoint(tmp_path_factory) -> tuple:
    """An official-shaped MNIST LeNet checkpoint of random weights; returns (prefix, {name: value})."""
    rng = np.random.default_rng(0)
    values = {name: rng.normal(0.0, 0.05, shape).astype(np.float32) for name, shape in OFFICIAL_MNIST_LENET.items()}
    with tf.Graph().as_default():
        variables = [tf1.Variable(value, name=name) for name, value in values.items()]
        variables.append(tf1.Variable(np.int64(7), name="global_step"))
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            prefix = tf1.train.Saver(variables).save(session, str(tmp_path_factory.mktemp("official") / "model.ckpt"))
    return prefix, values


def reference_accuracy(values: dict) -> float:
    """Top-1 of official LeNet (eval mode) on the images, written here from raw ops: conv-pool twice, fc, fc."""
    images, labels = load_bundled("test")
    batch = (images[:NUM_IMAGES, ..., np.newaxis].astype(np.float32) - 128.0) / 128.0
    with tf.Graph().as_default(), tf1.Session() as session:
        net = batch
        for layer in ("conv1", "conv2"):
            net = tf.nn.relu(tf.nn.conv2d(net, values[f"LeNet/{layer}/weights"], 1, "SAME")
                             + values[f"LeNet/{layer}/biases"])
            net = tf.nn.max_pool2d(net, 2, 2, "VALID")
        net = tf.reshape(net, [NUM_IMAGES, -1])
        net = tf.nn.relu(tf.matmul(net, values["LeNet/fc3/weights"]) + values["LeNet/fc3/biases"])
        logits = session.run(tf.matmul(net, values["LeNet/fc4/weights"]) + values["LeNet/fc4/biases"])
    return float(np.mean(logits.argmax(axis=1) == labels[:NUM_IMAGES]))


def test_official_checkpoint_evaluates_on_mnist_records(mnist_dir, official_checkpoint, tmp_path):
    prefix, values = official_checkpoint
    metrics = evaluate(EvalConfig(checkpoint_path=prefix, eval_dir=str(tmp_path), dataset_name="mnist",
                                  dataset_dir=mnist_dir, model_name="lenet", batch_size=32),
                       print_line=lambda line: None)
    assert metrics["num_examples"] == NUM_IMAGES and metrics["global_step"] == 7
    assert metrics["accuracy"] == pytest.approx(reference_accuracy(values), abs=ACCURACY_ATOL)


def test_official_checkpoint_fine_tunes_with_one_channel(mnist_dir, official_checkpoint, tmp_path):
    prefix, values = official_checkpoint
    config = lenet_config(str(tmp_path), dataset_name="mnist", dataset_dir=mnist_dir, checkpoint_path=prefix,
                          max_number_of_steps=1)
    train(config, print_line=lambda line: None)
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path)))
    for name, shape in OFFICIAL_MNIST_LENET.items():
        assert reader.get_variable_to_shape_map()[name] == shape, name
    fine_tuned = reader.get_tensor("LeNet/conv1/weights")
    np.testing.assert_allclose(fine_tuned, values["LeNet/conv1/weights"], atol=0.05)  # restored, then one SGD step
    assert not np.array_equal(fine_tuned, values["LeNet/conv1/weights"])
