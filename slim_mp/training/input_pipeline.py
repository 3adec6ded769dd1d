"""tf.data input for training and evaluation: decode and preprocess in parallel, shuffle, repeat, batch, prefetch.

With a ``seed`` the batches are the same in every run: the order is fixed (seeded shuffles,
deterministic map and interleave) and the preprocessing runs one image at a time. Its random
distortions (crops, flips, colour) are stateful ops: run in parallel, which image draws which
numbers depends on thread timing. Unseeded runs keep ``num_preprocessing_threads`` parallel calls.
"""

import contextlib
import dataclasses
import re
from typing import Callable, Dict, Iterator, Optional, Tuple

import numpy as np
import tensorflow as tf

from slim_mp.datasets import DatasetSpec

PreprocessFn = Callable[[tf.Tensor, int, int], tf.Tensor]

SHUFFLE_BUFFER_IMAGES = 2048
_NEGATIVE_LABEL = "a label minus --labels_offset is negative"
_NEGATIVE_LABEL_VALUE = re.compile(re.escape(_NEGATIVE_LABEL) + r"\W+(-?\d+)")


@dataclasses.dataclass(frozen=True)
class InputOptions:
    """How batches are made.

    Training (``is_training``) shuffles, repeats forever and drops the last partial batch;
    evaluation reads the split exactly once and keeps the partial batch, so every example
    counts once. ``labels_offset`` is subtracted from every label (e.g. 1 to drop a
    background class). ``num_shards``/``shard_index`` give each worker of a cluster every
    ``num_shards``-th example (disjoint shards when ``seed`` fixes the file order). A ``seed``
    makes the batches repeatable and preprocesses one image at a time (``preprocessing_calls``).
    """

    batch_size: int
    image_size: int
    is_training: bool
    num_preprocessing_threads: int = 4
    labels_offset: int = 0
    seed: Optional[int] = None
    num_shards: int = 1
    shard_index: int = 0


def preprocessing_calls(options: InputOptions) -> int:
    """How many images are preprocessed at once: ``num_preprocessing_threads``, or 1 with a ``seed``.

    The preprocessing functions draw their distortions from stateful random ops; parallel calls
    share those ops' state in whatever order the threads reach them, so only serial calls give
    each image the same numbers in every run.
    """
    return options.num_preprocessing_threads if options.seed is None else 1


def check_options(options: InputOptions) -> None:
    """Raise ValueError naming the flag at fault for sizes and thread counts that are not positive."""
    for flag, value in (
        ("batch_size", options.batch_size),
        ("image_size", options.image_size),
        ("num_preprocessing_threads", options.num_preprocessing_threads),
    ):
        if value < 1:
            raise ValueError(f"--{flag}={value} must be a positive integer; pass e.g. --{flag}=32.")
    if options.labels_offset < 0:
        raise ValueError(f"--labels_offset={options.labels_offset} must be >= 0; pass 0 or the offset to remove.")


def _offset_label(label: tf.Tensor, labels_offset: int) -> tf.Tensor:
    """``label - labels_offset`` as int64; running it fails (``negative_label_errors`` names the flag) if negative."""
    label = tf.cast(label, tf.int64)
    if not labels_offset:
        return label
    check = tf.debugging.Assert(label >= labels_offset, [_NEGATIVE_LABEL, label])
    with tf.control_dependencies([check]):
        return label - labels_offset


@contextlib.contextmanager
def negative_label_errors(labels_offset: int) -> Iterator[None]:
    """Turn the failure of ``_offset_label`` inside the block into a ValueError naming ``--labels_offset``."""
    try:
        yield
    except tf.errors.InvalidArgumentError as error:
        match = _NEGATIVE_LABEL_VALUE.search(error.message)
        if not match:
            raise
        raise ValueError(
            f"--labels_offset={labels_offset} makes label {match.group(1)} of the data negative; this dataset's "
            f"labels start below {labels_offset}: pass a smaller --labels_offset (0 unless label 0 is a "
            "background class to drop)."
        ) from error


def make_dataset(spec: DatasetSpec, preprocess: PreprocessFn, options: InputOptions,
                 source: Optional[tf.data.Dataset] = None) -> tf.data.Dataset:
    """Return a dataset of ``(images float32 [B, S, S, C], labels int64 [B])`` batches of ``spec``.

    ``source`` replaces ``spec.make_dataset()`` as the examples read (e.g. the same arrays, fed).
    """
    check_options(options)
    size = options.image_size

    def prepare(image: tf.Tensor, label: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        image = preprocess(image, size, size)
        return image, _offset_label(label, options.labels_offset)

    dataset = source if source is not None else spec.make_dataset(shuffle_files=options.is_training, seed=options.seed)
    if options.num_shards > 1:
        dataset = dataset.shard(options.num_shards, options.shard_index)
    if options.is_training:
        buffer = min(spec.num_samples, max(SHUFFLE_BUFFER_IMAGES, 4 * options.batch_size))
        dataset = dataset.shuffle(buffer, seed=options.seed, reshuffle_each_iteration=True).repeat()
    # TF-Slim's preprocessing is graph code without Python control flow on tensors: autograph would
    # rewrite it into the same ops, after parsing its source (0.1-0.4 s per process).
    dataset = dataset.map(tf.autograph.experimental.do_not_convert(prepare),
                          num_parallel_calls=preprocessing_calls(options), deterministic=True)
    dataset = dataset.batch(options.batch_size, drop_remainder=options.is_training)
    return dataset.prefetch(tf.data.AUTOTUNE)


def make_iterator(spec: DatasetSpec, preprocess: PreprocessFn, options: InputOptions) -> tf.compat.v1.data.Iterator:
    """Return a one-shot iterator over ``make_dataset`` (graph mode); each ``get_next()`` call is another batch."""
    return tf.compat.v1.data.make_one_shot_iterator(make_dataset(spec, preprocess, options))


@dataclasses.dataclass(frozen=True)
class InputFeed:
    """The initializer of an iterator over fed arrays, and the arrays to feed it."""

    initializer: tf.Operation
    feed_dict: Dict[tf.Tensor, np.ndarray]

    def initialize(self, session: tf.compat.v1.Session) -> None:
        """(Re)start the iterator at the beginning of the data; run once per session before reading."""
        session.run(self.initializer, feed_dict=self.feed_dict)


def make_fed_iterator(
    spec: DatasetSpec, preprocess: PreprocessFn, options: InputOptions
) -> Tuple[tf.compat.v1.data.Iterator, Optional[InputFeed]]:
    """Like ``make_iterator``, but in-memory data (``spec.arrays``) is fed through placeholders.

    The graph then holds two placeholders instead of the data as constants, so its GraphDef
    (TensorBoard's graph view, a checkpoint's ``.meta``) stays small. Returns the iterator and the
    ``InputFeed`` to run once the session exists (None for file-backed data, whose iterator is one-shot).
    """
    if spec.arrays is None:
        return make_iterator(spec, preprocess, options), None
    images, labels = spec.arrays
    fed_images = tf.compat.v1.placeholder(tf.as_dtype(images.dtype), images.shape, name="fed_images")
    fed_labels = tf.compat.v1.placeholder(tf.as_dtype(labels.dtype), labels.shape, name="fed_labels")
    source = tf.data.Dataset.from_tensor_slices((fed_images, fed_labels))
    iterator = tf.compat.v1.data.make_initializable_iterator(make_dataset(spec, preprocess, options, source))
    return iterator, InputFeed(iterator.initializer, {fed_images: images, fed_labels: labels})


def next_batch(spec: DatasetSpec, preprocess: PreprocessFn, options: InputOptions) -> Tuple[tf.Tensor, tf.Tensor]:
    """Return the ``(images, labels)`` tensors of a one-shot iterator over ``make_dataset`` (graph mode).

    In evaluation, running them past the end raises ``tf.errors.OutOfRangeError``.
    """
    images, labels = make_iterator(spec, preprocess, options).get_next()
    return images, labels
