"""Read TF-Slim TFRecord files as ``(image, label)`` datasets, and name the file at fault when a read fails.

TensorFlow reports a damaged file as ``DataLossError: corrupted record at N``
without saying which file, and a shard removed or made unreadable mid-run as a
``NotFoundError`` / ``PermissionDeniedError`` buried in a graph traceback;
``named_read_errors`` turns each into one ``InputDataError`` sentence naming the
file and the fix, so a bad shard among hundreds is easy to replace. A training
loop catches ``InputDataError`` to save its last completed step before it stops.
"""

import contextlib
import functools
import os
import re
import struct
from typing import Iterator, Optional, Sequence, Tuple

import tensorflow as tf

from slim_mp.config_fields import ArgumentError, argument
from slim_mp.datasets import tfrecord_format
from slim_mp.datasets.label_checks import LABEL_OUT_OF_RANGE, checked_labels, label_problem

_PARALLEL_FILES = 4
# What to do about a shard that vanished or became unreadable while the run read it, by the error's type.
_LOST_FILE = {
    tf.errors.NOT_FOUND: ("is gone (No such file or directory): it was removed, or its folder unmounted, while "
                              "the run read it; put it back (or convert the data again)"),
    tf.errors.PERMISSION_DENIED: "can no longer be read (Permission denied); give this user read permission on it",
}
_READ_FAILURE = re.compile(r"(?:corrupted|truncated) record at \d+|[^\n{}]*(?:No such file|Permission denied)[^\n]*")
_WRONG_SHAPE = re.compile(r"(\[[\d,]+\]) is not compatible with expected shape (\[[\d,?]+\])")
_UNDECODABLE = ("Unknown image file format", "Invalid PNG data", "Invalid JPEG data")


class InputDataError(ArgumentError):
    """The input data failed while the run read it: a damaged, truncated, removed or unreadable file, or a record
    the model cannot take. The message is one sentence naming the file (``path``; None when no single file is at
    fault) and the fix."""

    def __init__(self, message: str, path: Optional[str] = None):
        super().__init__(message)
        self.path = path


def _failure_reason(error: tf.errors.OpError) -> str:
    """Return the informative part of a TensorFlow read error (TF wraps it in node names and stack traces)."""
    match = _READ_FAILURE.search(error.message)
    return match.group(0).strip() if match else type(error).__name__


def read_tfrecords(
    files: Sequence[str],
    image_shape: tfrecord_format.ImageShape,
    shuffle_files: bool = False,
    seed: Optional[int] = None,
    num_classes: Optional[int] = None,
) -> tf.data.Dataset:
    """Return a dataset of ``(image uint8 [H, W, C], label int64)`` from ``files``.

    Several files are read at once, in a fixed interleaving, so the order is
    reproducible; ``shuffle_files`` permutes the file order (with ``seed``).
    With ``num_classes``, a label outside ``0..num_classes-1`` makes reading fail
    (``named_read_errors`` names the record).
    """
    if not files:
        raise ValueError("files is empty; pass at least one TFRecord file to read.")
    file_names = tf.data.Dataset.from_tensor_slices(list(files))
    if shuffle_files:
        file_names = file_names.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    records = file_names.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(len(files), _PARALLEL_FILES),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    decode = functools.partial(tfrecord_format.decode_example, image_shape=image_shape)
    examples = records.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    return examples if num_classes is None else checked_labels(examples, num_classes)


# A TFRecord is: uint64 length, uint32 masked CRC of the length, the data, uint32 masked CRC of the data.
_LENGTH_BYTES = 8
_CRC_BYTES = 4
_LABEL_FEATURE = "image/class/label"


def count_records(path: str) -> int:
    """Count the records of TFRecord file ``path`` from their length fields (reads 12 bytes per record).

    Raises:
      ValueError: naming the file when its last record is cut short.
    """
    size = os.path.getsize(path)
    count = offset = 0
    with open(path, "rb") as handle:
        while offset < size:
            header = handle.read(_LENGTH_BYTES)
            if len(header) < _LENGTH_BYTES:
                break
            (length,) = struct.unpack("<Q", header)
            offset += _LENGTH_BYTES + 2 * _CRC_BYTES + length
            if offset > size:
                break
            handle.seek(offset)
            count += 1
    if offset != size:
        raise ValueError(
            f"TFRecord file {path} is truncated after {count} records; replace it by running its converter again."
        )
    return count


def _records(path: str) -> Iterator[bytes]:
    """The serialized records of TFRecord file ``path``, in order (CRCs not checked: the reader already did)."""
    with open(path, "rb") as handle:
        while True:
            header = handle.read(_LENGTH_BYTES)
            if len(header) < _LENGTH_BYTES:
                return
            (length,) = struct.unpack("<Q", header)
            handle.seek(_CRC_BYTES, 1)
            data = handle.read(length)
            handle.seek(_CRC_BYTES, 1)
            if len(data) < length:
                return
            yield data


def find_label_out_of_range(files: Sequence[str], num_classes: int) -> Optional[Tuple[str, int, int]]:
    """The first ``(file, record index, label)`` whose label is outside ``0..num_classes-1``, or None."""
    for path in files:
        for index, record in enumerate(_records(path)):
            values = tf.train.Example.FromString(record).features.feature[_LABEL_FEATURE].int64_list.value
            if values and not 0 <= values[0] < num_classes:
                return path, index, int(values[0])
    return None


def check_tfrecord_file(path: str) -> None:
    """Read every record of ``path``; raise ``InputDataError`` naming the file if it is damaged or unreadable.

    Reads the whole file, so it costs one pass over the data.
    """
    graph = tf.Graph()
    with graph.as_default():
        num_records = tf.data.TFRecordDataset(path).reduce(tf.constant(0, tf.int64), lambda count, _: count + 1)
    with tf.compat.v1.Session(graph=graph) as session:
        try:
            session.run(num_records)
        except (tf.errors.DataLossError, tf.errors.NotFoundError, tf.errors.PermissionDeniedError) as error:
            raise InputDataError(
                f"TFRecord file {path} cannot be read ({_failure_reason(error)}); "
                "replace it by running its converter again.", path
            ) from error


def _lost_file(error: tf.errors.OpError, files: Sequence[str]) -> Optional[str]:
    """The file of ``files`` that ``error`` (not found, permission denied) is about: the one its message names,
    else the first that cannot be opened now; None when neither (the error is about something else)."""
    named = [path for path in files if f"{path};" in error.message]
    if named:
        return named[0]
    return next((path for path in files if not os.access(path, os.R_OK)), None)


@contextlib.contextmanager
def named_read_errors(files: Sequence[str], dataset_name: str, num_classes: Optional[int] = None) -> Iterator[None]:
    """Turn TensorFlow read errors raised inside the block into an ``InputDataError`` naming the file at fault.

    Wrap the loop that pulls from a dataset made of ``files`` (eager iteration
    or ``session.run``). On ``DataLossError`` the files are checked in order
    until the damaged one is found; a file removed or made unreadable mid-run is
    named from the error; undecodable and wrongly sized images are reported
    too, and so is a label outside ``num_classes`` (naming shard, record and label).
    """
    try:
        yield
    except tf.errors.DataLossError as error:
        for path in files:
            check_tfrecord_file(path)
        raise InputDataError(
            f"reading dataset '{dataset_name}' failed ({_failure_reason(error)}) although each "
            f"of its {len(files)} files reads back alone; check the disk holding them."
        ) from error
    except (tf.errors.NotFoundError, tf.errors.PermissionDeniedError) as error:
        path = _lost_file(error, files)
        if path is None:
            raise
        raise InputDataError(
            f"TFRecord file {path} of dataset '{dataset_name}' {_LOST_FILE[error.error_code]}, then run the same "
            "command again.", path
        ) from None
    except tf.errors.InvalidArgumentError as error:
        if num_classes is not None and LABEL_OUT_OF_RANGE in error.message:
            found = find_label_out_of_range(files, num_classes)
            if found is None:
                raise
            path, index, label = found
            raise InputDataError(label_problem(f"shard {path} record {index}", label, num_classes, dataset_name),
                                 path) from None
        wrong_shape = _WRONG_SHAPE.search(error.message)
        if wrong_shape:
            raise InputDataError(
                f"dataset '{dataset_name}' holds an image of shape {wrong_shape.group(1)} where "
                f"{wrong_shape.group(2)} is expected; check that {argument('dataset_name')} matches the files in "
                f"{argument('dataset_dir')}."
            ) from error
        if any(marker in error.message for marker in _UNDECODABLE):
            raise InputDataError(
                f"dataset '{dataset_name}' holds an image that is neither valid JPEG nor PNG; convert the data "
                "again (the image-folder converter skips such files)."
            ) from error
        raise
