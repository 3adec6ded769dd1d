"""Labels outside a data set's classes stop reading with an error naming the record and the label.

An out-of-range label would otherwise train silently (``tf.one_hot`` makes an all-zero row) and
crash evaluation with a raw traceback. In-memory data is checked at once (``check_array_labels``);
TFRecord data is checked as it is read (``checked_labels``), and on failure
``tfrecord_reader.find_label_out_of_range`` reads the shards again to name the first bad record.
"""

from typing import Tuple

import numpy as np
import tensorflow as tf

from slim_mp.config_fields import ArgumentError, argument

# The first words of the assertion message, which the read-error handler recognises.
LABEL_OUT_OF_RANGE = "a label is outside the classes of the data set"


def label_problem(where: str, label: int, num_classes: int, dataset_name: str) -> str:
    """The error message for ``label`` found at ``where`` in a data set of ``num_classes`` classes."""
    return (
        f"{where} has label {label}, outside the {num_classes} classes (0 to {num_classes - 1}) of dataset "
        f"'{dataset_name}'; fix or drop that record (convert the data again), or check {argument('dataset_name')}."
    )


def check_array_labels(labels: np.ndarray, num_classes: int, source: str, dataset_name: str) -> None:
    """Raise ``ArgumentError`` naming the first example of in-memory ``labels`` (read from ``source``) out of range."""
    bad = np.flatnonzero((labels < 0) | (labels >= num_classes))
    if bad.size:
        index = int(bad[0])
        raise ArgumentError(label_problem(f"example {index} of {source}", int(labels[index]), num_classes,
                                          dataset_name))


def checked_labels(dataset: tf.data.Dataset, num_classes: int) -> tf.data.Dataset:
    """``dataset`` of ``(image, label)`` pairs whose reading fails (InvalidArgumentError) on a label out of range."""

    def check(image: tf.Tensor, label: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        in_range = tf.logical_and(label >= 0, label < num_classes)
        with tf.control_dependencies([tf.debugging.Assert(in_range, [LABEL_OUT_OF_RANGE, label])]):
            return image, tf.identity(label)

    return dataset.map(check)
