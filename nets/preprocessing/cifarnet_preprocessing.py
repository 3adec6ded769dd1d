"""CifarNet preprocessing: per-image standardization, with pad-and-crop, flip and colour jitter for training.

Values are handled on the 0..255 scale, so the brightness jitter of 63 levels
means the same as in the official training; standardization then gives each
image zero mean and unit variance.
"""

import tensorflow as tf

from nets.preprocessing.image_utils import check_output_size, maybe_grayscale, to_float_rgb

PADDING = 4
BRIGHTNESS_MAX_DELTA = 63.0
CONTRAST_RANGE = (0.2, 1.8)


def preprocess_for_train(
    image: tf.Tensor, output_height: int, output_width: int, padding: int = PADDING, use_grayscale: bool = False
) -> tf.Tensor:
    """Zero-pad by ``padding`` pixels, random-crop to the output size, flip, jitter brightness/contrast, standardize."""
    if padding < 0:
        raise ValueError(f"padding={padding} must be >= 0 (pixels added on each side before the random crop).")
    image = to_float_rgb(image, 255.0)
    image = tf.pad(image, [[padding, padding], [padding, padding], [0, 0]])
    image = tf.image.random_crop(image, [output_height, output_width, 3])
    image = tf.image.random_flip_left_right(image)
    image = tf.image.random_brightness(image, max_delta=BRIGHTNESS_MAX_DELTA)
    image = tf.image.random_contrast(image, *CONTRAST_RANGE)
    return tf.image.per_image_standardization(maybe_grayscale(image, use_grayscale))


def preprocess_for_eval(
    image: tf.Tensor, output_height: int, output_width: int, use_grayscale: bool = False
) -> tf.Tensor:
    """Centre-crop or zero-pad to the output size, then standardize."""
    image = to_float_rgb(image, 255.0)
    image = tf.image.resize_with_crop_or_pad(image, output_height, output_width)
    return tf.image.per_image_standardization(maybe_grayscale(image, use_grayscale))


def preprocess_image(
    image: tf.Tensor,
    output_height: int,
    output_width: int,
    is_training: bool = False,
    use_grayscale: bool = False,
    padding: int = PADDING,
) -> tf.Tensor:
    """Return the float32 standardized image ``[output_height, output_width, 3 or 1]``.

    ``padding`` is the zero border added before the training crop (unused in evaluation).
    """
    check_output_size(output_height, output_width)
    if is_training:
        return preprocess_for_train(image, output_height, output_width, padding, use_grayscale)
    return preprocess_for_eval(image, output_height, output_width, use_grayscale)
