"""Preprocessing styles and their factory: shapes, dtypes, value ranges, grayscale handling, errors.

Deterministic evaluation paths are compared with NumPy float32 references;
random training paths are checked for shape, range and variation.
"""

import numpy as np
import pytest
import tensorflow as tf

from nets.preprocessing import (
    cifarnet_preprocessing,
    inception_preprocessing,
    lenet_preprocessing,
    preprocessing_factory,
    vgg_preprocessing,
)

# Float32 arithmetic of a few operations per pixel on values up to 255.
FLOAT32_TOLERANCE = 1e-4
MEAN_RGB = np.array([123.68, 116.78, 103.94], np.float32)
LUMA_WEIGHTS = np.array([0.2989, 0.5870, 0.1140], np.float32)


def _image(height: int, width: int, channels: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.RandomState(seed).randint(0, 256, (height, width, channels)).astype(np.uint8)


def _evaluate(fetches):
    with tf.compat.v1.Session() as session:
        return session.run(fetches)


# style -> (output size, kwargs, lowest value, highest value) of an uint8 input.
STYLES = {
    "inception": (24, {}, -1.0, 1.0),
    "vgg": (24, {"resize_side_min": 28, "resize_side_max": 36}, -MEAN_RGB.max(), 255.0 - MEAN_RGB.min()),
    "lenet": (28, {}, -1.0, 127.0 / 128.0),
}


@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("is_training", [False, True])
@pytest.mark.parametrize("use_grayscale", [False, True])
def test_output_shape_dtype_and_range(style, is_training, use_grayscale):
    size, kwargs, low, high = STYLES[style]
    preprocess = preprocessing_factory.get_preprocessing(style, is_training, use_grayscale)
    with tf.Graph().as_default():
        output = preprocess(tf.constant(_image(40, 50)), size, size, **kwargs)
        channels = 1 if use_grayscale else 3
        assert output.shape.as_list() == [size, size, channels]
        value = _evaluate(output)
    assert value.dtype == np.float32
    assert value.min() >= low - FLOAT32_TOLERANCE and value.max() <= high + FLOAT32_TOLERANCE


@pytest.mark.parametrize("is_training", [False, True])
@pytest.mark.parametrize("use_grayscale", [False, True])
def test_cifarnet_output_is_standardized(is_training, use_grayscale):
    preprocess = preprocessing_factory.get_preprocessing("cifarnet", is_training, use_grayscale)
    with tf.Graph().as_default():
        value = _evaluate(preprocess(tf.constant(_image(32, 32)), 32, 32))
    assert value.shape == (32, 32, 1 if use_grayscale else 3)
    assert value.dtype == np.float32
    assert abs(value.mean()) < FLOAT32_TOLERANCE
    assert value.std() == pytest.approx(1.0, abs=1e-3)


def test_inception_eval_matches_numpy_central_crop_and_scaling():
    image = _image(16, 16)
    with tf.Graph().as_default():
        value = _evaluate(
            inception_preprocessing.preprocess_image(tf.constant(image), 8, 8, central_fraction=0.5)
        )
    # The central half of a 16x16 image is rows/columns 4..11; resizing 8x8 to 8x8 is the identity.
    expected = (image[4:12, 4:12].astype(np.float32) / 255.0 - 0.5) * 2.0
    np.testing.assert_allclose(value, expected, atol=FLOAT32_TOLERANCE)


def test_inception_accepts_float_images_in_unit_range():
    image = _image(16, 16)
    with tf.Graph().as_default():
        from_uint8, from_float = _evaluate(
            [
                inception_preprocessing.preprocess_image(tf.constant(image), 8, 8, central_fraction=None),
                inception_preprocessing.preprocess_image(
                    tf.constant(image.astype(np.float32) / 255.0), 8, 8, central_fraction=None
                ),
            ]
        )
    np.testing.assert_allclose(from_uint8, from_float, atol=FLOAT32_TOLERANCE)


def test_vgg_eval_matches_numpy_central_crop_minus_mean():
    image = _image(10, 13)
    with tf.Graph().as_default():
        value = _evaluate(vgg_preprocessing.preprocess_image(tf.constant(image), 8, 8, resize_side_min=10))
    # The smaller side is already 10, so the resize is the identity; crop offsets are (1, 2).
    expected = image[1:9, 2:10].astype(np.float32) - MEAN_RGB
    np.testing.assert_allclose(value, expected, atol=FLOAT32_TOLERANCE)


def test_vgg_grayscale_subtracts_the_mean_luminance():
    image = _image(10, 10)
    with tf.Graph().as_default():
        value = _evaluate(
            vgg_preprocessing.preprocess_image(tf.constant(image), 10, 10, resize_side_min=10, use_grayscale=True)
        )
    expected = (image.astype(np.float32) - MEAN_RGB) @ LUMA_WEIGHTS
    np.testing.assert_allclose(value[..., 0], expected, atol=FLOAT32_TOLERANCE)


def test_cifarnet_eval_matches_numpy_standardization():
    image = _image(32, 32)
    with tf.Graph().as_default():
        value = _evaluate(cifarnet_preprocessing.preprocess_image(tf.constant(image), 32, 32))
    pixels = image.astype(np.float32)
    expected = (pixels - pixels.mean()) / max(pixels.std(), 1.0 / np.sqrt(pixels.size))
    np.testing.assert_allclose(value, expected, atol=FLOAT32_TOLERANCE)


def test_lenet_matches_numpy_scaling_and_pads_small_images():
    image = _image(24, 24)
    with tf.Graph().as_default():
        value = _evaluate(lenet_preprocessing.preprocess_image(tf.constant(image), 28, 28))
    expected = np.full((28, 28, 3), -1.0, np.float32)  # zero padding maps to -1
    expected[2:26, 2:26] = (image.astype(np.float32) - 128.0) / 128.0
    np.testing.assert_allclose(value, expected, atol=FLOAT32_TOLERANCE)


@pytest.mark.parametrize("style", ["inception", "vgg", "cifarnet", "lenet"])
def test_single_channel_input_is_repeated_to_rgb(style):
    size = 28 if style == "lenet" else 24
    kwargs = {"resize_side_min": 24} if style == "vgg" else {}
    preprocess = preprocessing_factory.get_preprocessing(style)
    with tf.Graph().as_default():
        value = _evaluate(preprocess(tf.constant(_image(30, 30, channels=1)), size, size, **kwargs))
    assert value.shape == (size, size, 3)
    if style == "vgg":  # channels differ by the per-channel mean only
        value = value + MEAN_RGB
    np.testing.assert_allclose(value[..., 0], value[..., 1], atol=FLOAT32_TOLERANCE)
    np.testing.assert_allclose(value[..., 0], value[..., 2], atol=FLOAT32_TOLERANCE)


@pytest.mark.parametrize("style", ["inception", "vgg", "cifarnet", "lenet"])
def test_grayscale_of_a_gray_rgb_image_equals_the_single_channel_path(style):
    gray = _image(30, 30, channels=1)
    size = 28 if style == "lenet" else 24
    kwargs = {"resize_side_min": 24} if style == "vgg" else {}
    preprocess = preprocessing_factory.get_preprocessing(style, use_grayscale=True)
    with tf.Graph().as_default():
        from_rgb, from_gray = _evaluate(
            [
                preprocess(tf.constant(np.repeat(gray, 3, axis=-1)), size, size, **kwargs),
                preprocess(tf.constant(gray), size, size, **kwargs),
            ]
        )
    assert from_rgb.shape == from_gray.shape == (size, size, 1)
    np.testing.assert_allclose(from_rgb, from_gray, atol=1e-3)


def test_inception_full_training_mode_draws_different_crops_and_stays_in_range():
    with tf.Graph().as_default():
        image = tf.constant(_image(48, 48))
        outputs = [inception_preprocessing.preprocess_image(image, 16, 16, True, fast_mode=False) for _ in range(4)]
        values = _evaluate(outputs)
    assert all(value.shape == (16, 16, 3) for value in values)
    assert all(value.min() >= -1.0 and value.max() <= 1.0 for value in values)
    assert len({value.tobytes() for value in values}) > 1


@pytest.mark.parametrize(
    "name, style",
    [
        ("inception_v3", inception_preprocessing),
        ("mobilenet_v2_140", inception_preprocessing),
        ("nasnet_large", inception_preprocessing),
        ("pnasnet_mobile", inception_preprocessing),
        ("resnet_v2_50", inception_preprocessing),
        ("vgg_16", vgg_preprocessing),
        ("resnet_v1_101", vgg_preprocessing),
        ("cifarnet", cifarnet_preprocessing),
        ("lenet", lenet_preprocessing),
    ],
)
def test_factory_maps_networks_to_their_training_style(name, style):
    assert preprocessing_factory.PREPROCESSING_MODULES[name] is style


def test_factory_unknown_name_lists_valid_names():
    with pytest.raises(ValueError) as error:
        preprocessing_factory.get_preprocessing("incepton")
    message = str(error.value)
    assert "did you mean 'inception'" in message
    assert all(name in message for name in preprocessing_factory.preprocessing_names())


@pytest.mark.parametrize(
    "image, error_type, argument",
    [
        (np.zeros((2, 8, 8, 3), np.uint8), ValueError, "image"),
        (np.zeros((8, 8, 4), np.uint8), ValueError, "channels"),
        (np.zeros((8, 8, 3), bool), TypeError, "dtype"),
    ],
)
def test_bad_images_are_rejected(image, error_type, argument):
    preprocess = preprocessing_factory.get_preprocessing("inception")
    with tf.Graph().as_default():
        with pytest.raises(error_type, match=argument):
            preprocess(tf.constant(image), 8, 8)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda image: lenet_preprocessing.preprocess_image(image, 0, 8), "output_height"),
        (lambda image: cifarnet_preprocessing.preprocess_image(image, 8, 8.5), "output_width"),
        (lambda image: inception_preprocessing.preprocess_image(image, 8, 8, central_fraction=1.5), "central_fraction"),
        (
            lambda image: vgg_preprocessing.preprocess_image(
                image, 8, 8, True, resize_side_min=40, resize_side_max=20
            ),
            "resize_side_min",
        ),
        (lambda image: cifarnet_preprocessing.preprocess_image(image, 8, 8, True, padding=-1), "padding"),
    ],
)
def test_bad_arguments_are_named(call, argument):
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=argument):
            call(tf.constant(_image(16, 16)))
