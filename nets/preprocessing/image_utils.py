"""Input checks and conversions shared by the preprocessing styles.

Every style accepts one image ``[height, width, channels]`` with 1 or 3
channels. Integer images use their dtype's full range (uint8: 0..255); float
images are taken to lie in [0, 1], TensorFlow's convention for float images.
Single-channel images are repeated to RGB (``to_float_rgb``) by every style but
LeNet's, which keeps the image's channels as the official one does, so MNIST
reaches LeNet with its one channel (``preprocessing_factory.output_channels``
states the rule).

Resizing uses TF1 sampling (``resize_tf1``), as the official TF-Slim
preprocessing did when the pretrained checkpoints were trained and evaluated.
"""

from typing import Sequence, Union

import tensorflow as tf

ResizeMethodV1 = tf.compat.v1.image.ResizeMethod


def check_output_size(output_height: int, output_width: int) -> None:
    """Reject output sizes that are not positive integers."""
    for argument, value in (("output_height", output_height), ("output_width", output_width)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{argument}={value!r} must be a positive int (the side of the network input).")


def to_float_rgb(image: tf.Tensor, max_value: float) -> tf.Tensor:
    """Validate ``image`` and return it as float32 RGB with values in [0, ``max_value``] (gray repeated)."""
    image = to_float(image, max_value)
    return tf.image.grayscale_to_rgb(image) if image.shape[-1] == 1 else image


def to_float(image: tf.Tensor, max_value: float) -> tf.Tensor:
    """Validate ``image`` (1 or 3 channels) and return it as float32 with values in [0, ``max_value``]."""
    image = tf.convert_to_tensor(image)
    if image.shape.rank != 3:
        raise ValueError(
            f"image must be one [height, width, channels] image, got shape {image.shape}; "
            "preprocess each image of a batch separately (e.g. with tf.map_fn)."
        )
    channels = image.shape[-1]
    if channels not in (1, 3):
        raise ValueError(f"image has {channels} channels; pass a grayscale (1) or RGB (3) image.")
    if not (image.dtype.is_integer or image.dtype.is_floating):
        raise TypeError(f"image has dtype {image.dtype.name}; pass an integer (e.g. uint8) or float image.")
    if image.dtype.is_integer and image.dtype.max == max_value:
        # uint8 to 0..255: a plain cast, exact like the official code (x / 255 * 255 is not exact in float32).
        image = tf.cast(image, tf.float32)
    else:
        image = tf.image.convert_image_dtype(image, tf.float32)
        image = image * max_value if max_value != 1.0 else image
    return image


def resize_tf1(
    image: tf.Tensor, size: Union[Sequence[int], tf.Tensor], method: int = ResizeMethodV1.BILINEAR
) -> tf.Tensor:
    """Resize ``image`` to ``size`` ([height, width]) with TF1 sampling, as the official preprocessing does.

    Output pixel ``i`` samples the input at ``i * in_size / out_size`` (no
    half-pixel offset, corners not aligned). TF2's ``tf.image.resize`` uses
    half-pixel centres instead, which shifts the image by up to half an input
    pixel and changes the logits of the pretrained checkpoints.
    """
    return tf.compat.v1.image.resize(image, size, method=method, align_corners=False)


def maybe_grayscale(image: tf.Tensor, use_grayscale: bool) -> tf.Tensor:
    """Convert an RGB image to a single luminance channel when ``use_grayscale`` is set (a gray one stays)."""
    return tf.image.rgb_to_grayscale(image) if use_grayscale and image.shape[-1] != 1 else image
