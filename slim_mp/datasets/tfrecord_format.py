"""TF-Slim's TFRecord example format: one ``tf.train.Example`` per image.

Keys written by the official TF-Slim converters and by ours:
``image/encoded`` (JPEG or PNG bytes), ``image/format``, ``image/class/label``
(int64), ``image/height`` and ``image/width``. Decoding reads only what a
classifier needs (image and label) and tolerates the extra keys other
converters add (ImageNet's boxes, Visual Wake Words' ids). The image format
is taken from the bytes themselves, so ``image/format`` spellings
('jpg', 'JPEG', 'png') do not matter when reading.
"""

from typing import Optional

import tensorflow as tf

JPEG_MAGIC = b"\xff\xd8\xff"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

ImageShape = tuple[Optional[int], Optional[int], int]

_PARSE_SPEC = {
    "image/encoded": tf.io.FixedLenFeature((), tf.string),
    "image/class/label": tf.io.FixedLenFeature((), tf.int64),
}


def sniff_image_format(encoded: bytes) -> Optional[str]:
    """Return ``'jpeg'`` or ``'png'`` from the file signature of ``encoded``, or None for anything else."""
    if encoded.startswith(JPEG_MAGIC):
        return "jpeg"
    if encoded.startswith(PNG_MAGIC):
        return "png"
    return None


def _bytes_feature(value: bytes) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _int64_feature(value: int) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))


def encode_example(encoded_image: bytes, image_format: str, label: int, height: int, width: int) -> bytes:
    """Return one serialized ``tf.train.Example`` in the TF-Slim layout."""
    if not isinstance(encoded_image, bytes):
        raise TypeError(f"encoded_image must be bytes, got {type(encoded_image).__name__}; pass the file's raw bytes.")
    if image_format not in ("jpeg", "png"):
        raise ValueError(f"image_format must be 'jpeg' or 'png', got {image_format!r}; re-encode the image first.")
    features = {
        "image/encoded": _bytes_feature(encoded_image),
        "image/format": _bytes_feature(image_format.encode("ascii")),
        "image/class/label": _int64_feature(int(label)),
        "image/height": _int64_feature(int(height)),
        "image/width": _int64_feature(int(width)),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def decode_example(serialized: tf.Tensor, image_shape: ImageShape) -> tuple[tf.Tensor, tf.Tensor]:
    """Parse one serialized example into ``(image uint8 [H, W, C], label int64)``.

    ``image_shape`` is ``(height, width, channels)``; ``channels`` is forced
    (grayscale is repeated, alpha dropped) so every image of a data set has the
    same depth, and known heights/widths are checked and set statically.
    """
    parsed = tf.io.parse_single_example(serialized, _PARSE_SPEC)
    image = tf.io.decode_image(parsed["image/encoded"], channels=image_shape[2], expand_animations=False)
    image = tf.ensure_shape(image, image_shape)
    return image, parsed["image/class/label"]
