"""Input pipeline: channels, label offset, exact single pass for evaluation, full batches for training,
seeded repeats."""

import numpy as np
import pytest
import tensorflow as tf

from slim_mp.datasets import DatasetSpec
from slim_mp.training.input_pipeline import InputOptions, next_batch, preprocessing_calls

NUM_EXAMPLES = 10
RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, size=(NUM_EXAMPLES, 6, 6, 1), dtype=np.uint8)
LABELS = np.arange(NUM_EXAMPLES, dtype=np.int64) % 4 + 1


def tiny_spec() -> DatasetSpec:
    """A 10-image grayscale split with labels 1..4, read in order."""

    def read(shuffle_files, seed):
        del shuffle_files, seed
        return tf.data.Dataset.from_tensor_slices((IMAGES, LABELS))

    return DatasetSpec("tiny", "test", NUM_EXAMPLES, 5, {}, (6, 6, 1), (), read)


def scale_only(image, height, width):
    """A preprocessing with a known result: float pixels in 0..255, no resizing."""
    del height, width
    return tf.cast(image, tf.float32)


def randomly_distorted(image, height, width):
    """A preprocessing drawing from stateful random ops, as the official training preprocessings do."""
    del height, width
    image = tf.image.random_flip_left_right(tf.cast(image, tf.float32))
    return image + tf.random.uniform(tf.shape(image), maxval=1.0)


def read_all(options: InputOptions, max_batches: int = 100, preprocess=scale_only) -> list:
    """Run the pipeline in a graph; return the (images, labels) batches until the end or ``max_batches``.

    The graph-level seed is ``options.seed``, as the training graph sets it.
    """
    with tf.Graph().as_default():
        if options.seed is not None:
            tf.compat.v1.set_random_seed(options.seed)
        batch = next_batch(tiny_spec(), preprocess, options)
        batches = []
        with tf.compat.v1.Session() as session:
            for _ in range(max_batches):
                try:
                    batches.append(session.run(batch))
                except tf.errors.OutOfRangeError:
                    break
    return batches


def test_evaluation_reads_every_example_once_in_order_with_the_partial_batch():
    batches = read_all(InputOptions(batch_size=4, image_size=6, is_training=False))
    assert [len(labels) for _, labels in batches] == [4, 4, 2]
    labels = np.concatenate([labels for _, labels in batches])
    np.testing.assert_array_equal(labels, LABELS)


def test_the_decoded_channels_reach_the_preprocessing_unchanged():
    images, _ = read_all(InputOptions(batch_size=NUM_EXAMPLES, image_size=6, is_training=False))[0]
    assert images.shape == (NUM_EXAMPLES, 6, 6, 1)  # the preprocessing style decides about channels
    np.testing.assert_array_equal(images, IMAGES.astype(np.float32))


def test_labels_offset_is_subtracted():
    _, labels = read_all(InputOptions(batch_size=NUM_EXAMPLES, image_size=6, is_training=False, labels_offset=1))[0]
    np.testing.assert_array_equal(labels, LABELS - 1)


def test_training_repeats_shuffles_and_keeps_only_full_batches():
    batches = read_all(InputOptions(batch_size=4, image_size=6, is_training=True, seed=1), max_batches=10)
    assert len(batches) == 10  # 40 images from a 10-image split: it repeats
    assert all(len(labels) == 4 for _, labels in batches)
    labels = np.concatenate([labels for _, labels in batches])
    assert not np.array_equal(labels[:NUM_EXAMPLES], LABELS)  # shuffled
    assert sorted(np.unique(labels)) == sorted(np.unique(LABELS))


def test_a_seed_gives_the_same_randomly_distorted_batches_in_every_run():
    """Default thread count; without serial preprocessing, parallel calls share the random ops' state
    in thread order and the second pipeline's images differ (this failed before the fix)."""
    options = InputOptions(batch_size=4, image_size=6, is_training=True, seed=3)
    first, second = (read_all(options, max_batches=60, preprocess=randomly_distorted) for _ in range(2))
    for (images, labels), (images_again, labels_again) in zip(first, second):
        np.testing.assert_array_equal(labels, labels_again)
        np.testing.assert_array_equal(images, images_again)


def test_unseeded_runs_keep_the_parallel_preprocessing():
    assert preprocessing_calls(InputOptions(batch_size=4, image_size=6, is_training=True)) == 4
    assert preprocessing_calls(InputOptions(batch_size=4, image_size=6, is_training=True, seed=0)) == 1


@pytest.mark.parametrize("field", ["batch_size", "image_size", "num_preprocessing_threads"])
def test_non_positive_sizes_name_the_flag(field):
    options = dict(batch_size=4, image_size=6, is_training=False)
    options[field] = 0
    with pytest.raises(ValueError, match=f"--{field}=0"):
        read_all(InputOptions(**options))
