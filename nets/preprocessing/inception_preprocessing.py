"""Inception preprocessing (also used by MobileNet, NASNet, PNASNet and ResNet v2): values in [-1, 1].

Training: a random crop covering 5-100% of the image (aspect ratio 3:4 to 4:3,
at least 10% of the bounding box), resized to the output size, randomly
flipped and colour-jittered. Evaluation: the central ``central_fraction`` of
the image (87.5% by default), resized to the output size.

``fast_mode`` (the default) keeps training cheap: bilinear resizing only and a
fixed brightness-then-saturation jitter; without it the resize method and the
order of brightness, saturation, hue and contrast jitter are drawn per image.

Every resize uses TF1 sampling (``image_utils.resize_tf1``), like the official
code the checkpoints were trained and evaluated with.
"""

import functools
from typing import Callable, Optional, Sequence

import tensorflow as tf

from nets.preprocessing.image_utils import (
    ResizeMethodV1,
    check_output_size,
    maybe_grayscale,
    resize_tf1,
    to_float_rgb,
)

CENTRAL_FRACTION = 0.875
MIN_OBJECT_COVERED = 0.1
ASPECT_RATIO_RANGE = (0.75, 1.33)
AREA_RANGE = (0.05, 1.0)
MAX_CROP_ATTEMPTS = 100

RESIZE_METHODS = (
    ResizeMethodV1.BILINEAR,
    ResizeMethodV1.NEAREST_NEIGHBOR,
    ResizeMethodV1.BICUBIC,
    ResizeMethodV1.AREA,
)

COLOR_JITTERS = {
    "brightness": lambda image: tf.image.random_brightness(image, max_delta=32.0 / 255.0),
    "saturation": lambda image: tf.image.random_saturation(image, lower=0.5, upper=1.5),
    "hue": lambda image: tf.image.random_hue(image, max_delta=0.2),
    "contrast": lambda image: tf.image.random_contrast(image, lower=0.5, upper=1.5),
}
FAST_COLOR_ORDER = ("brightness", "saturation")
COLOR_ORDERS = (
    ("brightness", "saturation", "hue", "contrast"),
    ("saturation", "brightness", "contrast", "hue"),
    ("contrast", "hue", "brightness", "saturation"),
    ("hue", "saturation", "contrast", "brightness"),
)


def _apply_one_at_random(image: tf.Tensor, transforms: Sequence[Callable]) -> tf.Tensor:
    """Apply one of ``transforms``, drawn uniformly per call, to ``image``."""
    if len(transforms) == 1:
        return transforms[0](image)
    index = tf.random.uniform([], maxval=len(transforms), dtype=tf.int32)
    return tf.switch_case(index, [functools.partial(transform, image) for transform in transforms])


def _jitter_in_order(image: tf.Tensor, order: Sequence[str]) -> tf.Tensor:
    """Apply the named colour jitters one after the other."""
    for name in order:
        image = COLOR_JITTERS[name](image)
    return image


def distort_color(image: tf.Tensor, fast_mode: bool = True) -> tf.Tensor:
    """Random colour jitter of an RGB image in [0, 1]; the result is clipped back to [0, 1]."""
    orders = (FAST_COLOR_ORDER,) if fast_mode else COLOR_ORDERS
    jitters = [functools.partial(_jitter_in_order, order=order) for order in orders]
    return tf.clip_by_value(_apply_one_at_random(image, jitters), 0.0, 1.0)


def _to_signed_unit_range(image: tf.Tensor) -> tf.Tensor:
    """Map [0, 1] to [-1, 1], the input range of the Inception-style checkpoints."""
    return (image - 0.5) * 2.0


def distorted_crop(image: tf.Tensor, bbox: Optional[tf.Tensor] = None) -> tf.Tensor:
    """A random crop of ``image`` that covers part of ``bbox`` ([1, N, 4] normalized boxes; whole image if None)."""
    if bbox is None:
        bbox = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, shape=[1, 1, 4])
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        tf.shape(image),
        bounding_boxes=bbox,
        min_object_covered=MIN_OBJECT_COVERED,
        aspect_ratio_range=ASPECT_RATIO_RANGE,
        area_range=AREA_RANGE,
        max_attempts=MAX_CROP_ATTEMPTS,
        use_image_if_no_bounding_boxes=True,
    )
    return tf.slice(image, begin, size)


def random_resize(image: tf.Tensor, output_height: int, output_width: int, fast_mode: bool = True) -> tf.Tensor:
    """Resize to the output size, ignoring the aspect ratio: bilinear in ``fast_mode``, else a per-image method."""
    methods = RESIZE_METHODS[:1] if fast_mode else RESIZE_METHODS
    size = [output_height, output_width]
    resizers = [functools.partial(resize_tf1, size=size, method=method) for method in methods]
    image = _apply_one_at_random(image, resizers)
    image.set_shape([output_height, output_width, 3])
    return image


def preprocess_for_train(
    image: tf.Tensor,
    output_height: int,
    output_width: int,
    bbox: Optional[tf.Tensor] = None,
    fast_mode: bool = True,
    use_grayscale: bool = False,
) -> tf.Tensor:
    """Random crop, resize, flip and colour jitter; returns float32 values in [-1, 1]."""
    image = distorted_crop(to_float_rgb(image, 1.0), bbox)
    image = random_resize(image, output_height, output_width, fast_mode)
    image = tf.image.random_flip_left_right(image)
    image = distort_color(image, fast_mode)
    return _to_signed_unit_range(maybe_grayscale(image, use_grayscale))


def preprocess_for_eval(
    image: tf.Tensor,
    output_height: int,
    output_width: int,
    central_fraction: Optional[float] = CENTRAL_FRACTION,
    use_grayscale: bool = False,
) -> tf.Tensor:
    """Central crop of ``central_fraction`` (none if None), bilinear resize; returns float32 values in [-1, 1]."""
    image = to_float_rgb(image, 1.0)
    if central_fraction:
        image = tf.image.central_crop(image, central_fraction)
    image = resize_tf1(image, [output_height, output_width])
    image.set_shape([output_height, output_width, 3])
    return _to_signed_unit_range(maybe_grayscale(image, use_grayscale))


def preprocess_image(
    image: tf.Tensor,
    output_height: int,
    output_width: int,
    is_training: bool = False,
    bbox: Optional[tf.Tensor] = None,
    fast_mode: bool = True,
    central_fraction: Optional[float] = CENTRAL_FRACTION,
    use_grayscale: bool = False,
) -> tf.Tensor:
    """Return the float32 image ``[output_height, output_width, 3 or 1]`` with values in [-1, 1].

    ``bbox`` and ``fast_mode`` only matter in training, ``central_fraction`` only in evaluation.
    """
    check_output_size(output_height, output_width)
    if central_fraction is not None and not 0.0 < central_fraction <= 1.0:
        raise ValueError(f"central_fraction={central_fraction} must be in (0, 1], or None for no crop.")
    if is_training:
        return preprocess_for_train(image, output_height, output_width, bbox, fast_mode, use_grayscale)
    return preprocess_for_eval(image, output_height, output_width, central_fraction, use_grayscale)
