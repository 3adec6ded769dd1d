"""LeNet preprocessing: centre crop or zero-pad to the output size, scale 0..255 to [-1, 1).

Training and evaluation are the same (LeNet was trained without augmentation). The image keeps its
channels, as in the official style: MNIST's single channel reaches LeNet, whose official
``LeNet/conv1/weights`` are [5, 5, 1, 32].
"""

import tensorflow as tf

from nets.preprocessing.image_utils import check_output_size, maybe_grayscale, to_float

# Read by ``preprocessing_factory.output_channels``: this style passes the image's channels through.
KEEPS_CHANNELS = True


def preprocess_image(
    image: tf.Tensor, output_height: int, output_width: int, is_training: bool = False, use_grayscale: bool = False
) -> tf.Tensor:
    """Return the float32 image ``[output_height, output_width, channels]`` with values in [-1, 1).

    ``channels`` is the image's own (1 or 3), or 1 with ``use_grayscale``.
    """
    del is_training  # identical in both modes
    check_output_size(output_height, output_width)
    image = to_float(image, 255.0)
    image = tf.image.resize_with_crop_or_pad(image, output_height, output_width)
    image = maybe_grayscale(image, use_grayscale)
    return (image - 128.0) / 128.0
