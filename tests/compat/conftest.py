"""Fixtures of the tf_slim compatibility tests: official-format TFRecords and their tf_slim reader.

The records use the keys of the official converters (``download_and_convert_mnist.py``,
``dataset_utils.image_to_tfexample``); the reader is the official ``datasets/mnist.py`` recipe
(``official_style_train.get_split``: ``slim.dataset.Dataset`` with a ``TFExampleDecoder`` and
``tfexample_decoder.Image``), so these tests go through tf_slim's reader as a user's copy of the
official scripts does.
"""

from typing import Callable, Sequence

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

import datasets_support
import official_style_train
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


@pytest.fixture
def write_official_records() -> RecordWriter:
    """``write(path, images, labels, image_format)`` -> path of an official-format TFRecord file."""
    return _write_records


@pytest.fixture
def official_dataset() -> DatasetMaker:
    """``make(file_pattern, num_samples, shape=(28, 28, 1))`` -> the official tf_slim Dataset."""
    return official_style_train.get_split


@pytest.fixture
def random_images() -> Callable[[int, Sequence[int], int], np.ndarray]:
    """``make(count, shape, seed)`` -> uint8 images ``[count, *shape]`` with smooth content (JPEG-friendly)."""
    def make(count: int, shape: Sequence[int], seed: int) -> np.ndarray:
        rows, cols = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
        phases = np.random.default_rng(seed).uniform(0, 2 * np.pi, size=(count, shape[2]))
        waves = np.sin(rows[None, :, :, None] / 3.0 + phases[:, None, None, :]) + np.cos(cols[None, :, :, None] / 4.0)
        return np.clip(64 * waves + 128, 0, 255).astype(np.uint8)
    return make
