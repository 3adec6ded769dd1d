"""VGG / ResNet v1 preprocessing: aspect-preserving resize, crop, mean-pixel subtraction.

Training resizes the smaller side to a random length in
[``resize_side_min``, ``resize_side_max``], takes a random crop and flips it;
evaluation resizes the smaller side to ``resize_side_min`` and takes the
central crop. Values stay on the 0..255 scale, minus the ImageNet mean pixel,
as the VGG and ResNet v1 checkpoints expect.
"""

import tensorflow as tf

from nets.preprocessing.image_utils import check_output_size, maybe_grayscale, resize_tf1, to_float_rgb

MEAN_RGB = (123.68, 116.78, 103.94)
RESIZE_SIDE_MIN = 256
RESIZE_SIDE_MAX = 512


def resize_smaller_side(image: tf.Tensor, smaller_side: tf.Tensor) -> tf.Tensor:
    """Bilinearly resize (TF1 sampling) so the smaller side has ``smaller_side`` pixels, keeping the aspect ratio.

    The other side is rounded half to even, as in the official code.
    """
    size = tf.cast(tf.shape(image)[:2], tf.float32)
    scale = tf.cast(smaller_side, tf.float32) / tf.reduce_min(size)
    new_size = tf.cast(tf.round(size * scale), tf.int32)
    return resize_tf1(image, new_size)


def central_crop(image: tf.Tensor, height: int, width: int) -> tf.Tensor:
    """The ``height`` x ``width`` window in the middle of ``image`` (offsets rounded down)."""
    offsets = (tf.shape(image)[:2] - [height, width]) // 2
    cropped = tf.slice(image, [offsets[0], offsets[1], 0], [height, width, -1])
    cropped.set_shape([height, width, image.shape[-1]])
    return cropped


def subtract_mean(image: tf.Tensor, use_grayscale: bool) -> tf.Tensor:
    """Convert to grayscale if asked, then subtract the mean pixel (its luminance for grayscale)."""
    mean = tf.constant(MEAN_RGB, tf.float32)
    return maybe_grayscale(image, use_grayscale) - maybe_grayscale(mean[tf.newaxis, tf.newaxis, :], use_grayscale)


def preprocess_for_train(
    image: tf.Tensor,
    output_height: int,
    output_width: int,
    resize_side_min: int = RESIZE_SIDE_MIN,
    resize_side_max: int = RESIZE_SIDE_MAX,
    use_grayscale: bool = False,
) -> tf.Tensor:
    """Random scale (smaller side in [min, max]), random crop, random flip, mean subtraction."""
    if resize_side_min > resize_side_max:
        raise ValueError(
            f"resize_side_min={resize_side_min} exceeds resize_side_max={resize_side_max}; pass min <= max."
        )
    image = to_float_rgb(image, 255.0)
    smaller_side = tf.random.uniform([], minval=resize_side_min, maxval=resize_side_max + 1, dtype=tf.int32)
    image = resize_smaller_side(image, smaller_side)
    image = tf.image.random_crop(image, [output_height, output_width, 3])
    image = tf.image.random_flip_left_right(image)
    return subtract_mean(image, use_grayscale)


def preprocess_for_eval(
    image: tf.Tensor,
    output_height: int,
    output_width: int,
    resize_side: int = RESIZE_SIDE_MIN,
    use_grayscale: bool = False,
) -> tf.Tensor:
    """Resize the smaller side to ``resize_side``, take the central crop, subtract the mean pixel."""
    image = to_float_rgb(image, 255.0)
    image = resize_smaller_side(image, resize_side)
    image = central_crop(image, output_height, output_width)
    return subtract_mean(image, use_grayscale)


def preprocess_image(
    image: tf.Tensor,
    output_height: int,
    output_width: int,
    is_training: bool = False,
    resize_side_min: int = RESIZE_SIDE_MIN,
    resize_side_max: int = RESIZE_SIDE_MAX,
    use_grayscale: bool = False,
) -> tf.Tensor:
    """Return the float32 mean-subtracted image ``[output_height, output_width, 3 or 1]``.

    Evaluation uses ``resize_side_min`` as the resize length; ``resize_side_max`` only matters in training.
    """
    check_output_size(output_height, output_width)
    if is_training:
        return preprocess_for_train(
            image, output_height, output_width, resize_side_min, resize_side_max, use_grayscale
        )
    return preprocess_for_eval(image, output_height, output_width, resize_side_min, use_grayscale)
