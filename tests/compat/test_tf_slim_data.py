"""tf_slim's reader under TF 2.21: ``DatasetDataProvider`` and ``tfexample_decoder.Image`` on official records.

Without ``control_flow_ops.case``/``cond`` and ``array_ops.stack`` restored, every image decode of
``tfexample_decoder`` fails with AttributeError. References: the pixels written (PNG is lossless) and
Pillow's decode of the same JPEG bytes.
"""

import io

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from PIL import Image as PILImage

import datasets_support

# tfexample_decoder.Image decodes with TensorFlow's default IDCT (INTEGER_FAST); Pillow's accurate
# IDCT of the same quality-95 grayscale bytes differs from it by up to 7 levels on these images.
JPEG_TOLERANCE = 8


def _read_in_order(dataset: slim.dataset.Dataset, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Read ``count`` (image, label) pairs through ``DatasetDataProvider`` without shuffling."""
    provider = slim.dataset_data_provider.DatasetDataProvider(dataset, num_readers=1, shuffle=False)
    image, label = provider.get(["image", "label"])
    images, labels = [], []
    with tf.compat.v1.Session() as session:
        session.run([tf.compat.v1.global_variables_initializer(), tf.compat.v1.local_variables_initializer()])
        coordinator = tf.compat.v1.train.Coordinator()
        threads = tf.compat.v1.train.start_queue_runners(session, coordinator)
        for _ in range(count):
            image_value, label_value = session.run([image, label])
            images.append(image_value)
            labels.append(label_value)
        coordinator.request_stop()
        coordinator.join(threads)
    return np.stack(images), np.array(labels)


@pytest.mark.parametrize("channels", [1, 3])
def test_provider_reads_official_png_records_exactly(tmp_path, write_official_records, official_dataset,
                                                     random_images, channels):
    images = random_images(6, (12, 10, channels), seed=channels)
    labels = [3, 1, 4, 1, 5, 9]
    path = write_official_records(str(tmp_path / "train.tfrecord"), images, labels, "png")
    with tf.Graph().as_default():
        read_images, read_labels = _read_in_order(official_dataset(path, 6, shape=(12, 10, channels)), 6)
    assert read_images.dtype == np.uint8
    np.testing.assert_array_equal(read_images, images)
    np.testing.assert_array_equal(read_labels, labels)


def test_provider_decodes_official_jpeg_records_like_pillow(tmp_path, write_official_records, official_dataset,
                                                             random_images):
    images = random_images(4, (16, 16, 1), seed=7)
    labels = [0, 2, 1, 2]
    path = write_official_records(str(tmp_path / "train.tfrecord"), images, labels, "jpeg")
    with tf.Graph().as_default():
        read_images, read_labels = _read_in_order(official_dataset(path, 4, shape=(16, 16, 1)), 4)
    expected = np.stack([np.asarray(PILImage.open(io.BytesIO(encoded)))[:, :, None]
                         for encoded in datasets_support.encode_images(list(images), "jpeg")])
    np.testing.assert_allclose(read_images.astype(int), expected.astype(int), atol=JPEG_TOLERANCE)
    np.testing.assert_array_equal(read_labels, labels)


def test_image_handler_picks_the_decoder_from_image_format():
    """One ``Image`` handler decodes a PNG and a JPEG record, chosen by ``image/format`` (control_flow_ops.case)."""
    pixels = np.full((4, 4, 3), 200, np.uint8)
    handler = slim.tfexample_decoder.Image(shape=[4, 4, 3], channels=3)
    decoder = slim.tfexample_decoder.TFExampleDecoder(
        {"image/encoded": tf.io.FixedLenFeature((), tf.string), "image/format": tf.io.FixedLenFeature((), tf.string)},
        {"image": handler})
    for image_format in ("png", "jpeg"):
        encoded = datasets_support.encode_images([pixels], image_format)[0]
        example = tf.train.Example(features=tf.train.Features(feature={
            "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded])),
            "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image_format.encode()])),
        })).SerializeToString()
        with tf.Graph().as_default(), tf.compat.v1.Session() as session:
            [decoded] = decoder.decode(tf.constant(example), ["image"])
            np.testing.assert_allclose(session.run(decoded).astype(int), pixels.astype(int), atol=JPEG_TOLERANCE)
