"""LeNet preprocessing: centre crop or zero-pad to the output size, scale 0..255 to [-1, 1).

Training and evaluation are the same (LeNet was trained without augmentation).
"""

import tensorflow as tf

from nets.preprocessing.image_utils import check_output_size, maybe_grayscale, to_float_rgb


def preprocess_image(
    image: tf.Tensor, output_height: int, output_width: int, is_training: bool = False, use_grayscale: bool = False
) -> tf.Tensor:
    """Return the float32 image ``[output_height, output_width, 3 or 1]`` with values in [-1, 1)."""
    del is_training  # identical in both modes
    check_output_size(output_height, output_width)
    image = to_float_rgb(image, 255.0)
    image = tf.image.resize_with_crop_or_pad(image, output_height, output_width)
    image = maybe_grayscale(image, use_grayscale)
    return (image - 128.0) / 128.0
