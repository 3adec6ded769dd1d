"""Helpers shared by the dataset tests: make encoded images and pull whole datasets, in graph mode.

Everything runs in a private ``tf.Graph`` with a session, the way the
training script uses datasets, so the tests do not depend on eager mode.
"""

from typing import Callable

import numpy as np
import tensorflow as tf


def encode_images(images: list[np.ndarray], image_format: str) -> list[bytes]:
    """Return PNG or JPEG (quality 95) bytes of uint8 ``[H, W, C]`` arrays."""
    with tf.Graph().as_default():
        pixels = tf.compat.v1.placeholder(tf.uint8, [None, None, None])
        encoded = tf.io.encode_png(pixels) if image_format == "png" else tf.io.encode_jpeg(pixels, quality=95)
        with tf.compat.v1.Session() as session:
            return [session.run(encoded, {pixels: image}) for image in images]


def read_all(make_dataset: Callable[[], tf.data.Dataset], batch_size: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """Build ``make_dataset()`` in a fresh graph and return all ``(images, labels)`` (images must share a shape)."""
    images, labels = [], []
    with tf.Graph().as_default():
        next_batch = tf.compat.v1.data.make_one_shot_iterator(make_dataset().batch(batch_size)).get_next()
        with tf.compat.v1.Session() as session:
            while True:
                try:
                    batch_images, batch_labels = session.run(next_batch)
                except tf.errors.OutOfRangeError:
                    break
                images.append(batch_images)
                labels.append(batch_labels)
    return np.concatenate(images), np.concatenate(labels)
