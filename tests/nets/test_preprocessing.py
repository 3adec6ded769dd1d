"""Preprocessing styles and their factory: shapes, dtypes, value ranges, grayscale handling, errors.

Deterministic evaluation paths are compared with NumPy float32 references;
random training paths are checked for shape, range and variation. Every
resize is pinned to the official TF1 sampling grid by references computed
from its formula (see the compatibility section below).
"""

import numpy as np
import pytest
import tensorflow as tf

from nets.preprocessing import (
    cifarnet_preprocessing,
    image_utils,
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


@pytest.mark.parametrize("style", ["inception", "vgg", "cifarnet"])
def test_single_channel_input_is_repeated_to_rgb(style):
    size = 24
    kwargs = {"resize_side_min": 24} if style == "vgg" else {}
    preprocess = preprocessing_factory.get_preprocessing(style)
    with tf.Graph().as_default():
        value = _evaluate(preprocess(tf.constant(_image(30, 30, channels=1)), size, size, **kwargs))
    assert value.shape == (size, size, 3)
    if style == "vgg":  # channels differ by the per-channel mean only
        value = value + MEAN_RGB
    np.testing.assert_allclose(value[..., 0], value[..., 1], atol=FLOAT32_TOLERANCE)
    np.testing.assert_allclose(value[..., 0], value[..., 2], atol=FLOAT32_TOLERANCE)


def test_lenet_keeps_a_single_channel_as_the_official_style_does():
    gray = _image(24, 24, channels=1)
    with tf.Graph().as_default():
        value = _evaluate(lenet_preprocessing.preprocess_image(tf.constant(gray), 28, 28))
    expected = np.full((28, 28, 1), -1.0, np.float32)  # official MNIST LeNet reads one channel
    expected[2:26, 2:26] = (gray.astype(np.float32) - 128.0) / 128.0
    np.testing.assert_allclose(value, expected, atol=FLOAT32_TOLERANCE)


@pytest.mark.parametrize("style", ["inception", "vgg", "cifarnet", "lenet", "resnet_v1_18", "mobilenet_v2"])
@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("use_grayscale", [False, True])
def test_output_channels_states_what_each_style_makes(style, channels, use_grayscale):
    expected = 1 if use_grayscale else (channels if style == "lenet" else 3)  # the rule, written out here
    assert preprocessing_factory.output_channels(style, channels, use_grayscale) == expected
    kwargs = {"resize_side_min": 24} if style in ("vgg", "resnet_v1_18") else {}
    preprocess = preprocessing_factory.get_preprocessing(style, use_grayscale=use_grayscale)
    with tf.Graph().as_default():
        value = _evaluate(preprocess(tf.constant(_image(30, 30, channels=channels)), 24, 24, **kwargs))
    assert value.shape == (24, 24, expected)
    assert preprocessing_factory.output_channels(style, None) == 3  # unknown channels: RGB


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


def test_resnet_v2_defaults_to_inception_style_and_vgg_gives_the_official_mapping():
    # The documented departure: the official factory maps resnet_v2_* to vgg, but the official
    # checkpoints were trained with inception preprocessing; --preprocessing_name=vgg restores the former.
    for depth in (50, 101, 152, 200):
        assert preprocessing_factory.PREPROCESSING_MODULES[f"resnet_v2_{depth}"] is inception_preprocessing
    image = _image(30, 40)
    with tf.Graph().as_default():
        by_name, official = _evaluate(
            [
                preprocessing_factory.get_preprocessing("vgg")(tf.constant(image), 24, 24),
                vgg_preprocessing.preprocess_image(tf.constant(image), 24, 24),
            ]
        )
    np.testing.assert_array_equal(by_name, official)


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


# --- Official TF-Slim compatibility: TF1 resize grid, crop and normalisation order -------------------------
#
# The references below are computed from the documented TF1 sampling formula, not from TensorFlow:
# output pixel i samples the input at src = i * in_size / out_size (float32, no half-pixel offset);
# bilinear mixes floor(src) and ceil(src) (clamped to the last pixel) with weight src - floor(src);
# nearest takes min(floor(src), in_size - 1). TF2's half-pixel grid samples at (i + 0.5) * scale - 0.5.

# Float32 resizing of values in [0, 1] against a float64 NumPy reference (a few roundings per pixel).
UNIT_RANGE_TOLERANCE = 2e-6
# Smallest largest-difference a half-pixel grid must show on the test images, so a grid regression fails.
HALF_PIXEL_GAP = 0.05


def _source_grid(in_size: int, out_size: int, half_pixel: bool):
    """Lower and upper source indices and the upper weight of every output index along one axis."""
    scale = np.float32(in_size) / np.float32(out_size)
    dst = np.arange(out_size, dtype=np.float32)
    src = (dst + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel else dst * scale
    lower = np.floor(src)
    weight = (src - lower).astype(np.float64)
    lower_index = np.clip(lower, 0, in_size - 1).astype(int)
    upper_index = np.clip(np.ceil(src), 0, in_size - 1).astype(int)
    return lower_index, upper_index, weight


def _bilinear_reference(image: np.ndarray, height: int, width: int, half_pixel: bool = False) -> np.ndarray:
    """Bilinear resize of an [h, w, c] image in float64 (TF1 grid unless ``half_pixel``)."""
    image = image.astype(np.float64)
    rows_low, rows_high, row_weight = _source_grid(image.shape[0], height, half_pixel)
    cols_low, cols_high, col_weight = _source_grid(image.shape[1], width, half_pixel)
    row_weight, col_weight = row_weight[:, None, None], col_weight[None, :, None]
    rows = image[rows_low] * (1.0 - row_weight) + image[rows_high] * row_weight
    return rows[:, cols_low] * (1.0 - col_weight) + rows[:, cols_high] * col_weight


def _nearest_reference(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """TF1 nearest-neighbour resize: input index min(floor(i * in / out), in - 1) on each axis."""
    rows = np.minimum(np.floor(np.arange(height) * (image.shape[0] / height)).astype(int), image.shape[0] - 1)
    cols = np.minimum(np.floor(np.arange(width) * (image.shape[1] / width)).astype(int), image.shape[1] - 1)
    return image[rows][:, cols]


def _assert_half_pixel_grid_differs(image: np.ndarray, height: int, width: int, scale: float = 1.0) -> None:
    """Guard of the test setup: a half-pixel resize of ``image`` would miss the reference by a clear margin."""
    gap = np.abs(_bilinear_reference(image, height, width) - _bilinear_reference(image, height, width, True)).max()
    assert gap * scale > HALF_PIXEL_GAP


@pytest.mark.parametrize(
    "in_size, out_size",
    [((12, 12), (5, 7)), ((6, 9), (13, 4)), ((7, 10), (7, 10))],
    ids=["down", "up-and-down", "identity"],
)
def test_resize_tf1_matches_the_documented_tf1_grid(in_size, out_size):
    image = _image(*in_size).astype(np.float32) / 255.0
    with tf.Graph().as_default():
        value = _evaluate(image_utils.resize_tf1(tf.constant(image), list(out_size)))
    np.testing.assert_allclose(value, _bilinear_reference(image, *out_size), rtol=0, atol=UNIT_RANGE_TOLERANCE)
    if in_size != out_size:
        _assert_half_pixel_grid_differs(image, *out_size)


def test_resize_tf1_nearest_neighbour_uses_the_tf1_grid():
    image = _image(12, 9).astype(np.float32)
    with tf.Graph().as_default():
        nearest = image_utils.ResizeMethodV1.NEAREST_NEIGHBOR
        value = _evaluate(image_utils.resize_tf1(tf.constant(image), [5, 7], nearest))
    np.testing.assert_array_equal(value, _nearest_reference(image, 5, 7))


def test_inception_eval_is_central_crop_then_tf1_bilinear_then_signed_unit_range():
    # 24x32 with the default central fraction 0.875: offsets int((24 - 21) / 2) = 1 and int((32 - 28) / 2) = 2,
    # crop 22x28 (the image minus twice the offset), then resize to 10x14 and map [0, 1] to [-1, 1].
    image = _image(24, 32, seed=5)
    with tf.Graph().as_default():
        value = _evaluate(inception_preprocessing.preprocess_image(tf.constant(image), 10, 14))
    crop = image[1:23, 2:30].astype(np.float32) / np.float32(255.0)
    expected = (_bilinear_reference(crop, 10, 14) - 0.5) * 2.0
    np.testing.assert_allclose(value, expected, rtol=0, atol=2 * UNIT_RANGE_TOLERANCE)
    _assert_half_pixel_grid_differs(crop, 10, 14, scale=2.0)


def test_inception_training_resize_is_tf1_bilinear_in_fast_mode():
    image = _image(12, 18, seed=6).astype(np.float32) / 255.0
    with tf.Graph().as_default():
        value = _evaluate(inception_preprocessing.random_resize(tf.constant(image), 5, 7, fast_mode=True))
    np.testing.assert_allclose(value, _bilinear_reference(image, 5, 7), rtol=0, atol=UNIT_RANGE_TOLERANCE)
    _assert_half_pixel_grid_differs(image, 5, 7)


# Absolute tolerance for float32 resizing of values up to 255 against the float64 reference.
PIXEL_RANGE_TOLERANCE = 1e-4


def test_vgg_eval_is_tf1_aspect_resize_then_central_crop_then_mean_subtraction():
    # Smaller side 10 -> 8: the image becomes 8x12 (scale 1.25 on both axes), the central 6x8 crop
    # starts at ((8 - 6) // 2, (12 - 8) // 2) = (1, 2), then the mean pixel is subtracted.
    image = _image(10, 15, seed=7)
    with tf.Graph().as_default():
        value = _evaluate(vgg_preprocessing.preprocess_image(tf.constant(image), 6, 8, resize_side_min=8))
    resized = _bilinear_reference(image, 8, 12)
    expected = resized[1:7, 2:10] - MEAN_RGB
    np.testing.assert_allclose(value, expected, rtol=0, atol=PIXEL_RANGE_TOLERANCE)
    _assert_half_pixel_grid_differs(image / 255.0, 8, 12)


def test_vgg_training_is_tf1_aspect_resize_then_crop_then_flip_then_mean_subtraction():
    # With resize_side_min == resize_side_max == 8 the 10x15 image always becomes 8x12, and an 8x12 crop
    # is the whole image; only the left-right flip stays random, so the output is one of two references.
    image = _image(10, 15, seed=8)
    with tf.Graph().as_default():
        output = vgg_preprocessing.preprocess_image(
            tf.constant(image), 8, 12, is_training=True, resize_side_min=8, resize_side_max=8
        )
        with tf.compat.v1.Session() as session:
            values = [session.run(output) for _ in range(4)]
    expected = _bilinear_reference(image, 8, 12) - MEAN_RGB
    for value in values:
        errors = [np.abs(value - candidate).max() for candidate in (expected, expected[:, ::-1])]
        assert min(errors) <= PIXEL_RANGE_TOLERANCE, errors


def test_vgg_rounds_the_longer_side_half_to_even():
    # 4x10 with smaller side 5: the longer side is 12.5, rounded half to even to 12 (rint in the official code).
    with tf.Graph().as_default():
        shape = _evaluate(tf.shape(vgg_preprocessing.resize_smaller_side(tf.zeros([4, 10, 3]), 5)))
    assert shape.tolist() == [5, 12, 3]


def test_uint8_pixels_enter_the_0_to_255_styles_exactly():
    # Every uint8 value once; the resize is the identity (smaller side already 16), so the official
    # cast-to-float gives exactly value - mean. Scaling through [0, 1] (x / 255 * 255) is off for 126 values.
    image = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, axis=-1)
    with tf.Graph().as_default():
        vgg, lenet = _evaluate(
            [
                vgg_preprocessing.preprocess_image(tf.constant(image), 16, 16, resize_side_min=16),
                lenet_preprocessing.preprocess_image(tf.constant(image), 16, 16),
            ]
        )
    pixels = image.astype(np.float32)
    np.testing.assert_array_equal(vgg, pixels - MEAN_RGB)
    np.testing.assert_array_equal(lenet, (pixels - np.float32(128.0)) / np.float32(128.0))


def _resize_nodes(build) -> list:
    """Every resize node of the graph ``build(image)`` makes, including those inside control-flow functions."""
    with tf.Graph().as_default() as graph:
        build(tf.constant(_image(40, 50)))
    graph_def = graph.as_graph_def()
    nodes = list(graph_def.node) + [node for function in graph_def.library.function for node in function.node_def]
    return [node for node in nodes if node.op.startswith("Resize") or node.op == "ScaleAndTranslate"]


@pytest.mark.parametrize(
    "build, expected_ops",
    [
        (lambda image: inception_preprocessing.preprocess_image(image, 24, 24), {"ResizeBilinear"}),
        (lambda image: inception_preprocessing.preprocess_image(image, 24, 24, True), {"ResizeBilinear"}),
        (
            lambda image: inception_preprocessing.preprocess_image(image, 24, 24, True, fast_mode=False),
            {"ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic", "ResizeArea"},
        ),
        (lambda image: vgg_preprocessing.preprocess_image(image, 24, 24), {"ResizeBilinear"}),
        (lambda image: vgg_preprocessing.preprocess_image(image, 24, 24, True), {"ResizeBilinear"}),
    ],
    ids=["inception-eval", "inception-train-fast", "inception-train-full", "vgg-eval", "vgg-train"],
)
def test_every_resize_uses_tf1_sampling(build, expected_ops):
    nodes = _resize_nodes(build)
    assert {node.op for node in nodes} == expected_ops
    for node in nodes:
        assert not node.attr["align_corners"].b, node.name
        assert "half_pixel_centers" not in node.attr or not node.attr["half_pixel_centers"].b, node.name
