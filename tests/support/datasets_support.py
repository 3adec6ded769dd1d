"""Helpers shared by the dataset tests: write IDX files, make encoded images, pull whole datasets in graph mode.

Everything runs in a private ``tf.Graph`` with a session, the way the
training script uses datasets, so the tests do not depend on eager mode.
"""

import gzip
import os
import pathlib
import struct
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from slim_mp.datasets import convert_image_folder, fashion_mnist


def encode_images(images: list[np.ndarray], image_format: str) -> list[bytes]:
    """Return PNG or JPEG (quality 95) bytes of uint8 ``[H, W, C]`` arrays."""
    with tf.Graph().as_default():
        pixels = tf.compat.v1.placeholder(tf.uint8, [None, None, None])
        encoded = tf.io.encode_png(pixels) if image_format == "png" else tf.io.encode_jpeg(pixels, quality=95)
        with tf.compat.v1.Session() as session:
            return [session.run(encoded, {pixels: image}) for image in images]


def write_idx(path: str, array: np.ndarray) -> None:
    """Write ``array`` (uint8) as a gzip IDX file: magic 0,0,0x08,ndim, big-endian sizes, raw bytes."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())


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


def three_class_image_folder(directory: str, num_shards: Optional[int] = None) -> str:
    """A converted image folder of 30 bundled Fashion-MNIST images of three classes (another class count)."""
    images, labels = fashion_mnist.load_bundled("test")
    photos = pathlib.Path(directory) / "photos"
    for label in range(3):
        chosen = images[labels == label][:10]
        (photos / f"class{label}").mkdir(parents=True)
        for index, encoded in enumerate(encode_images([image[..., np.newaxis] for image in chosen], "png")):
            (photos / f"class{label}" / f"{index}.png").write_bytes(encoded)
    records = os.path.join(directory, "records")
    convert_image_folder(str(photos), records, validation_fraction=0.0, num_shards=num_shards)
    return records
