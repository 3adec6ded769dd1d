"""Fixtures of the tf_slim compatibility tests: official-format TFRecords and their tf_slim reader.

The records use the keys of the official converters (``download_and_convert_mnist.py``,
``dataset_utils.image_to_tfexample``); the reader is the official ``datasets/mnist.py`` recipe
(``slim.dataset.Dataset`` with a ``TFExampleDecoder`` and ``tfexample_decoder.Image``), so these
tests go through tf_slim's reader exactly as a user's copy of the official scripts does.
"""

from typing import Callable, Sequence

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

import datasets_support
from slim_mp.datasets import tfrecord_format

RecordWriter = Callable[[str, np.ndarray, Sequence[int], str], str]
DatasetMaker = Callable[..., slim.dataset.Dataset]


def _write_records(path: str, images: np.ndarray, labels: Sequence[int], image_format: str) -> str:
    """Write uint8 ``[N, H, W, C]`` images as official-format examples to ``path``; return ``path``."""
    encoded = datasets_support.encode_images(list(images), image_format)
    with tf.io.TFRecordWriter(path) as writer:
        for image_bytes, image, label in zip(encoded, images, labels):
            writer.write(tfrecord_format.encode_example(
                image_bytes, image_format, int(label), image.shape[0], image.shape[1]))
    return path


def _official_dataset(file_pattern: str, num_samples: int, shape: Sequence[int] = (28, 28, 1),
                      num_classes: int = 10) -> slim.dataset.Dataset:
    """The official ``datasets/mnist.py`` dataset definition over ``file_pattern``."""
    keys_to_features = {
        "image/encoded": tf.io.FixedLenFeature((), tf.string, default_value=""),
        "image/format": tf.io.FixedLenFeature((), tf.string, default_value="raw"),
        "image/class/label": tf.io.FixedLenFeature([1], tf.int64, default_value=tf.zeros([1], dtype=tf.int64)),
    }
    items_to_handlers = {
        "image": slim.tfexample_decoder.Image(shape=list(shape), channels=shape[-1]),
        "label": slim.tfexample_decoder.Tensor("image/class/label", shape=[]),
    }
    decoder = slim.tfexample_decoder.TFExampleDecoder(keys_to_features, items_to_handlers)
    return slim.dataset.Dataset(
        data_sources=file_pattern, reader=tf.compat.v1.TFRecordReader, decoder=decoder,
        num_samples=num_samples, items_to_descriptions={"image": "an image", "label": "its class"},
        num_classes=num_classes)


@pytest.fixture
def write_official_records() -> RecordWriter:
    """``write(path, images, labels, image_format)`` -> path of an official-format TFRecord file."""
    return _write_records


@pytest.fixture
def official_dataset() -> DatasetMaker:
    """``make(file_pattern, num_samples, shape=(28, 28, 1))`` -> the official tf_slim Dataset."""
    return _official_dataset


@pytest.fixture
def random_images() -> Callable[[int, Sequence[int], int], np.ndarray]:
    """``make(count, shape, seed)`` -> uint8 images ``[count, *shape]`` with smooth content (JPEG-friendly)."""
    def make(count: int, shape: Sequence[int], seed: int) -> np.ndarray:
        rows, cols = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
        phases = np.random.default_rng(seed).uniform(0, 2 * np.pi, size=(count, shape[2]))
        waves = np.sin(rows[None, :, :, None] / 3.0 + phases[:, None, None, :]) + np.cos(cols[None, :, :, None] / 4.0)
        return np.clip(64 * waves + 128, 0, 255).astype(np.uint8)
    return make

