"""``get_dataset``: one entry point for every data set the training script accepts.

Official TF-Slim data sets read the TFRecord files their official converters
write; ``image_folder`` reads what ``scripts/convert_image_folder.py``
writes; ``fashion_mnist`` needs no files at all (the package bundles a
10k / 2k subset) but reads the original IDX files when given a folder;
``fashion_mnist_full`` reads them from the Debian package ``dataset-fashion-mnist``.

Bad arguments are ``ArgumentError``s naming ``dataset_name``, ``dataset_split_name`` or
``dataset_dir`` (a script's flags of the same names).
"""

import contextlib
import dataclasses
import functools
import glob
import os
from typing import Callable, ContextManager, Mapping, Optional

import numpy as np
import tensorflow as tf

from slim_mp.config_fields import ArgumentError, argument
from slim_mp.datasets import fashion_mnist, fashion_mnist_full, labels_file, tfrecord_reader
from slim_mp.datasets import image_folder_metadata as metadata
from slim_mp.datasets.label_checks import check_array_labels
from slim_mp.datasets.official import OFFICIAL_DATASETS
from slim_mp.datasets.tfrecord_format import ImageShape

DatasetReader = Callable[[bool, Optional[int]], tf.data.Dataset]

IMAGE_FOLDER = "image_folder"
FASHION_MNIST = "fashion_mnist"
FASHION_MNIST_NAMES = (FASHION_MNIST, fashion_mnist_full.DATASET_NAME)
DATASET_NAMES = tuple(sorted([*OFFICIAL_DATASETS, IMAGE_FOLDER, *FASHION_MNIST_NAMES]))


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """One split of one data set: its size, classes, image shape and how to read it.

    ``image_shape`` is ``(height, width, channels)`` with None where images
    vary; ``files`` lists the TFRecord files read (empty for in-memory data).
    ``arrays`` holds in-memory data as the ``(images [N, H, W, C], labels int64 [N])`` the
    reader yields, so a training graph can feed them instead of embedding them as constants.
    """

    name: str
    split: str
    num_samples: int
    num_classes: int
    labels_to_names: Mapping[int, str]
    image_shape: ImageShape
    files: tuple[str, ...]
    reader: DatasetReader = dataclasses.field(repr=False, compare=False)
    arrays: Optional[tuple[np.ndarray, np.ndarray]] = dataclasses.field(default=None, repr=False, compare=False)

    def make_dataset(self, shuffle_files: bool = False, seed: Optional[int] = None) -> tf.data.Dataset:
        """Return a dataset of ``(image uint8 [H, W, C], label int64)`` pairs, one pass over the split."""
        return self.reader(shuffle_files, seed)

    def read_errors(self) -> ContextManager[None]:
        """Context manager for the loop that consumes the dataset: read failures name the file at fault."""
        if not self.files:
            return contextlib.nullcontext()
        return tfrecord_reader.named_read_errors(self.files, self.name, self.num_classes)


def _check_split(name: str, split_name: str, split_names: list[str]) -> None:
    if split_name not in split_names:
        raise ArgumentError(
            f"dataset '{name}' has no split '{split_name}'; "
            f"set {argument('dataset_split_name')} to one of {', '.join(split_names)}."
        )


def _check_dataset_dir(name: str, dataset_dir: Optional[str]) -> str:
    if not dataset_dir:
        raise ArgumentError(f"dataset '{name}' is read from files; set {argument('dataset_dir')} to the folder its "
                            "converter wrote.")
    if not os.path.isdir(dataset_dir):
        raise ArgumentError(f"{argument('dataset_dir')}={dataset_dir} is not an existing folder; fix "
                            f"{argument('dataset_dir')} for '{name}'.")
    return dataset_dir


def _find_files(name: str, dataset_dir: str, pattern: str, converter: str) -> tuple[str, ...]:
    files = tuple(sorted(glob.glob(os.path.join(dataset_dir, pattern))))
    if not files:
        raise ArgumentError(
            f"no files match {os.path.join(dataset_dir, pattern)} in {argument('dataset_dir')}={dataset_dir}; "
            f"run {converter} or fix {argument('dataset_dir')}."
        )
    return files


def _tfrecord_spec(
    name: str, split_name: str, num_samples: int, labels_to_names: Mapping[int, str],
    num_classes: int, image_shape: ImageShape, files: tuple[str, ...],
) -> DatasetSpec:
    reader = functools.partial(tfrecord_reader.read_tfrecords, files, image_shape, num_classes=num_classes)
    return DatasetSpec(name, split_name, num_samples, num_classes, labels_to_names, image_shape, files, reader)


def _official(name: str, split_name: str, dataset_dir: Optional[str]) -> DatasetSpec:
    official = OFFICIAL_DATASETS[name]
    _check_split(name, split_name, list(official.split_sizes))
    dataset_dir = _check_dataset_dir(name, dataset_dir)
    files = _find_files(name, dataset_dir, official.file_pattern.format(split=split_name), f"the {name} converter")
    labels_to_names = labels_file.read_labels(dataset_dir) or dict(enumerate(official.default_names))
    return _tfrecord_spec(
        name, split_name, official.split_sizes[split_name], labels_to_names,
        official.num_classes, official.image_shape, files,
    )


def _check_record_counts(files: tuple[str, ...], split: metadata.SplitInfo, converter: str) -> None:
    """Raise ValueError naming the first shard whose record count differs from what the metadata file implies."""
    for path, expected in zip(files, metadata.shard_sizes(split.num_samples, split.num_shards)):
        found = tfrecord_reader.count_records(path)
        if found != expected:
            state = "is empty" if found == 0 else f"holds {found} records"
            raise ValueError(
                f"shard {path} {state} but {metadata.METADATA_FILENAME} implies {expected}; part of the data is "
                f"missing: run {converter} again into a new folder."
            )


def _image_folder(split_name: str, dataset_dir: Optional[str]) -> DatasetSpec:
    dataset_dir = _check_dataset_dir(IMAGE_FOLDER, dataset_dir)
    info = metadata.read_info(dataset_dir)
    _check_split(IMAGE_FOLDER, split_name, list(info.splits))
    split = info.splits[split_name]
    converter = "scripts/convert_image_folder.py"
    files = _find_files(IMAGE_FOLDER, dataset_dir, split.file_pattern, converter)
    if len(files) != split.num_shards:
        raise ArgumentError(
            f"{argument('dataset_dir')}={dataset_dir} holds {len(files)} files matching {split.file_pattern} but its "
            f"{metadata.METADATA_FILENAME} lists {split.num_shards}; run {converter} again into a new folder."
        )
    _check_record_counts(files, split, converter)
    height, width = info.image_size or (None, None)
    return _tfrecord_spec(
        IMAGE_FOLDER, split_name, split.num_samples, dict(enumerate(info.class_names)),
        len(info.class_names), (height, width, info.channels), files,
    )


def _reader_arrays(images: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """In-memory images ``[N, H, W]`` and labels as the reader yields them: ``[N, H, W, 1]`` and int64."""
    return images[..., np.newaxis], labels.astype(np.int64)


def _arrays_reader(pairs: tuple[np.ndarray, np.ndarray]) -> DatasetReader:
    """Return a reader over in-memory arrays; ``shuffle_files`` has no files to shuffle and is ignored."""

    def read(shuffle_files: bool, seed: Optional[int]) -> tf.data.Dataset:
        del shuffle_files, seed
        return tf.data.Dataset.from_tensor_slices(pairs)

    return read


def _fashion_mnist(name: str, split_name: str, dataset_dir: Optional[str]) -> DatasetSpec:
    _check_split(name, split_name, list(fashion_mnist.BUNDLED_SPLIT_SIZES))
    if dataset_dir:
        dataset_dir = _check_dataset_dir(name, dataset_dir)
    if dataset_dir or name == fashion_mnist_full.DATASET_NAME:
        images, labels = fashion_mnist_full.load_full(split_name, dataset_dir)
        source = dataset_dir or fashion_mnist_full.DEBIAN_DIR
    else:
        images, labels = fashion_mnist.load_bundled(split_name)
        source = fashion_mnist.BUNDLED_PATH
    check_array_labels(labels, len(fashion_mnist.CLASS_NAMES), source, name)
    pairs = _reader_arrays(images, labels)
    return DatasetSpec(
        name, split_name, len(labels), len(fashion_mnist.CLASS_NAMES),
        dict(enumerate(fashion_mnist.CLASS_NAMES)), (*images.shape[1:], 1), (), _arrays_reader(pairs), pairs,
    )


def get_dataset(dataset_name: str, dataset_split_name: str, dataset_dir: Optional[str] = None) -> DatasetSpec:
    """Return the ``DatasetSpec`` of split ``dataset_split_name`` of data set ``dataset_name``.

    ``dataset_dir`` is required except for ``fashion_mnist``, whose bundled
    subset is used when it is None. Raises ``ArgumentError`` (naming the argument to fix)
    for unknown names, unknown splits and missing files.
    """
    if not isinstance(dataset_name, str) or not isinstance(dataset_split_name, str):
        raise TypeError("dataset name and split name must be strings; pass e.g. get_dataset('cifar10', 'train', dir).")
    if dataset_name in OFFICIAL_DATASETS:
        return _official(dataset_name, dataset_split_name, dataset_dir)
    if dataset_name == IMAGE_FOLDER:
        return _image_folder(dataset_split_name, dataset_dir)
    if dataset_name in FASHION_MNIST_NAMES:
        return _fashion_mnist(dataset_name, dataset_split_name, dataset_dir)
    raise ArgumentError(f"unknown dataset '{dataset_name}' for {argument('dataset_name')}; choose one of "
                        f"{', '.join(DATASET_NAMES)}.")
