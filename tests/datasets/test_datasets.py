"""Tests of slim_mp.datasets: bundled Fashion-MNIST, IDX and TFRecord formats, the factory and its errors."""

import os
import struct

import numpy as np
import pytest
import tensorflow as tf

from argument_errors import raises_naming
from datasets_support import encode_images, read_all, three_class_image_folder, write_idx
from slim_mp.datasets import (
    InputDataError, fashion_mnist, get_dataset, idx_format, labels_file, tfrecord_format, tfrecord_reader,
)
from slim_mp.datasets import image_folder_metadata as metadata

# Facts of the official TF-Slim readers: split sizes, classes, and a file name each converter writes.
OFFICIAL = {
    "cifar10": ({"train": 50000, "test": 10000}, 10, "cifar10_{split}.tfrecord"),
    "flowers": ({"train": 3320, "validation": 350}, 5, "flowers_{split}_00003-of-00005.tfrecord"),
    "mnist": ({"train": 60000, "test": 10000}, 10, "mnist_{split}.tfrecord"),
    "imagenet": ({"train": 1281167, "validation": 50000}, 1001, "{split}-00017-of-01024"),
    "visualwakewords": ({"train": 82783, "val": 40504}, 2, "{split}.record-00042-of-00100"),
}
FASHION_NAMES = [
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
]


def write_tfrecord(path: str, examples: list[bytes]) -> None:
    with tf.io.TFRecordWriter(path) as writer:
        for example in examples:
            writer.write(example)


def cifar_like_dir(directory: str, images: list[np.ndarray], labels: list[int]) -> str:
    """Write ``cifar10_test.tfrecord`` (PNG examples) in ``directory`` as the official converter would."""
    encoded = encode_images(images, "png")
    examples = [tfrecord_format.encode_example(e, "png", lbl, 32, 32) for e, lbl in zip(encoded, labels)]
    write_tfrecord(os.path.join(directory, "cifar10_test.tfrecord"), examples)
    return os.path.join(directory, "cifar10_test.tfrecord")


# Bundled Fashion-MNIST ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("split_name, per_class", [("train", 1000), ("test", 200)])
def test_bundled_fashion_mnist_is_balanced_uint8_28x28(split_name, per_class):
    spec = get_dataset("fashion_mnist", split_name)
    images, labels = read_all(spec.make_dataset, batch_size=5000)
    assert spec.num_samples == 10 * per_class == len(labels)
    assert images.shape == (10 * per_class, 28, 28, 1) and images.dtype == np.uint8
    assert labels.dtype == np.int64
    assert np.bincount(labels, minlength=10).tolist() == [per_class] * 10
    assert spec.num_classes == 10 and [spec.labels_to_names[i] for i in range(10)] == FASHION_NAMES
    assert images.min() == 0 and images.max() == 255
    distinct = np.unique(images.reshape(len(images), -1), axis=0)
    assert len(distinct) > 0.99 * len(images), "a draw without replacement has (almost) no repeated image"


def test_bundled_license_and_readme_ship_next_to_the_data():
    data_dir = os.path.dirname(fashion_mnist.BUNDLED_PATH)
    with open(os.path.join(data_dir, "FASHION_MNIST_LICENSE.txt"), encoding="utf-8") as handle:
        notice = handle.read()
    assert "Zalando SE" in notice and "Permission is hereby granted" in notice
    assert os.path.exists(os.path.join(data_dir, "README.md"))


def test_balanced_subset_draws_per_class_without_replacement_and_is_seeded():
    labels = np.repeat(np.arange(4), 30)[np.random.default_rng(7).permutation(120)]
    picked = fashion_mnist.balanced_subset(labels, 5, seed=3)
    assert np.bincount(labels[picked]).tolist() == [5, 5, 5, 5]
    assert np.all(np.diff(picked) > 0)
    assert np.array_equal(picked, fashion_mnist.balanced_subset(labels, 5, seed=3))
    assert not np.array_equal(picked, fashion_mnist.balanced_subset(labels, 5, seed=4))
    with pytest.raises(ValueError, match="per_class=31"):
        fashion_mnist.balanced_subset(labels, 31, seed=0)


def test_fashion_mnist_reads_original_idx_files_from_dataset_dir(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (7, 28, 28), dtype=np.uint8)
    labels = np.array([0, 1, 2, 3, 9, 9, 5], dtype=np.uint8)
    write_idx(str(tmp_path / "t10k-images-idx3-ubyte.gz"), images)
    write_idx(str(tmp_path / "t10k-labels-idx1-ubyte.gz"), labels)
    spec = get_dataset("fashion_mnist", "test", str(tmp_path))
    read_images, read_labels = read_all(spec.make_dataset)
    assert spec.num_samples == 7
    np.testing.assert_array_equal(read_images[..., 0], images)
    np.testing.assert_array_equal(read_labels, labels)
    with pytest.raises(ValueError, match="train-images-idx3-ubyte"):
        get_dataset("fashion_mnist", "train", str(tmp_path))


def test_read_idx_rejects_bad_magic_and_truncated_files(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01\x00\x00\x00\x01\x00")
    with pytest.raises(ValueError, match="bad magic"):
        idx_format.read_idx(str(tmp_path / "bad"))
    (tmp_path / "short").write_bytes(struct.pack(">BBBBI", 0, 0, 8, 1, 10) + b"\x00" * 4)
    with pytest.raises(ValueError, match="truncated"):
        idx_format.read_idx(str(tmp_path / "short"))


# TFRecord format ---------------------------------------------------------------------------------------------


def test_tfrecord_round_trip_png_exact_jpeg_close_gray_expanded(tmp_path):
    rng = np.random.default_rng(1)
    color = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    ramp = np.add.outer(np.arange(32), np.arange(32)).astype(np.uint8) * 4
    smooth = np.stack([ramp, ramp[::-1], ramp.T], axis=-1)
    gray = rng.integers(0, 256, (32, 32, 1), dtype=np.uint8)
    png_color, png_gray = encode_images([color, gray], "png")
    (jpeg_smooth,) = encode_images([smooth], "jpeg")
    path = str(tmp_path / "cifar10_test.tfrecord")
    write_tfrecord(path, [
        tfrecord_format.encode_example(png_color, "png", 3, 32, 32),
        tfrecord_format.encode_example(jpeg_smooth, "jpeg", 7, 32, 32),
        tfrecord_format.encode_example(png_gray, "png", 0, 32, 32),
    ])
    images, labels = read_all(lambda: tfrecord_reader.read_tfrecords([path], (32, 32, 3)))
    assert images.dtype == np.uint8 and labels.dtype == np.int64
    assert labels.tolist() == [3, 7, 0]
    np.testing.assert_array_equal(images[0], color)
    # JPEG is lossy: against the float32 original, mean error stays under 2 grey levels at quality 95.
    assert np.abs(images[1].astype(np.float32) - smooth.astype(np.float32)).mean() < 2.0
    np.testing.assert_array_equal(images[2], np.repeat(gray, 3, axis=-1))


def test_encode_example_rejects_bad_arguments():
    with pytest.raises(TypeError, match="encoded_image"):
        tfrecord_format.encode_example("not bytes", "png", 0, 1, 1)
    with pytest.raises(ValueError, match="image_format"):
        tfrecord_format.encode_example(b"\x89PNG", "gif", 0, 1, 1)


def test_sniff_image_format_uses_file_signatures():
    (png,) = encode_images([np.zeros((2, 2, 3), np.uint8)], "png")
    (jpeg,) = encode_images([np.zeros((8, 8, 3), np.uint8)], "jpeg")
    assert [tfrecord_format.sniff_image_format(data) for data in (png, jpeg, b"GIF89a")] == ["png", "jpeg", None]


# Official data sets and the factory --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(OFFICIAL))
def test_official_metadata_and_file_names(name, tmp_path):
    split_sizes, num_classes, file_name = OFFICIAL[name]
    for split_name in split_sizes:
        (tmp_path / file_name.format(split=split_name)).write_bytes(b"")
    for split_name, size in split_sizes.items():
        spec = get_dataset(name, split_name, str(tmp_path))
        assert (spec.name, spec.split, spec.num_samples, spec.num_classes) == (name, split_name, size, num_classes)
        assert spec.files == (str(tmp_path / file_name.format(split=split_name)),)
    with raises_naming("--dataset_split_name"):
        get_dataset(name, "no_such_split", str(tmp_path))


def test_official_reader_prefers_labels_txt_and_reads_images(tmp_path):
    images = list(np.random.default_rng(2).integers(0, 256, (3, 32, 32, 3), dtype=np.uint8))
    cifar_like_dir(str(tmp_path), images, [4, 0, 9])
    default_names = get_dataset("cifar10", "test", str(tmp_path)).labels_to_names
    assert default_names[0] == "airplane" and default_names[9] == "truck"
    (tmp_path / "labels.txt").write_text("0:plane\n1:car:red\n\n9:lorry\n")
    spec = get_dataset("cifar10", "test", str(tmp_path))
    assert spec.labels_to_names == {0: "plane", 1: "car:red", 9: "lorry"}
    read_images, read_labels = read_all(spec.make_dataset)
    np.testing.assert_array_equal(read_images, np.stack(images))
    assert read_labels.tolist() == [4, 0, 9]


def test_labels_file_round_trip_and_malformed_line(tmp_path):
    labels_file.write_labels(str(tmp_path), {1: "b", 0: "a"})
    assert (tmp_path / "labels.txt").read_text() == "0:a\n1:b\n"
    assert labels_file.read_labels(str(tmp_path)) == {0: "a", 1: "b"}
    (tmp_path / "labels.txt").write_text("zero=a\n")
    with pytest.raises(ValueError, match="line 1"):
        labels_file.read_labels(str(tmp_path))


@pytest.mark.parametrize("name, split_name, dataset_dir, message", [
    ("cifar100", "train", None, "unknown dataset 'cifar100' for --dataset_name"),
    ("cifar10", "train", None, "set --dataset_dir"),
    ("flowers", "train", "", "set --dataset_dir"),
    ("mnist", "train", "/no/such/folder", "--dataset_dir=/no/such/folder is not an existing folder"),
    ("fashion_mnist", "validation", None, "no split 'validation'"),
    ("image_folder", "train", None, "set --dataset_dir"),
])
def test_factory_errors_name_the_argument_a_script_reads_as_its_flag(name, split_name, dataset_dir, message):
    with raises_naming(message):
        get_dataset(name, split_name, dataset_dir)


def test_factory_errors_for_empty_folders_and_types(tmp_path):
    with pytest.raises(ValueError, match=r"no files match .*flowers_train_\*\.tfrecord .*run the flowers converter"):
        get_dataset("flowers", "train", str(tmp_path))
    with pytest.raises(ValueError, match="dataset_info.json"):
        get_dataset("image_folder", "train", str(tmp_path))
    with pytest.raises(TypeError, match="strings"):
        get_dataset("cifar10", 1, str(tmp_path))


def test_image_folder_needs_every_shard_listed_in_metadata(tmp_path):
    info = metadata.FolderDatasetInfo(
        class_names=["a", "b"], channels=3, image_size=None,
        splits={"train": metadata.SplitInfo(5, 2, metadata.shard_pattern("train", 2))},
        skipped_files=[], validation_fraction=0.0, seed=0,
    )
    metadata.write_info(info, str(tmp_path))
    (tmp_path / metadata.shard_filename("train", 0, 2)).write_bytes(b"")
    with pytest.raises(ValueError, match="holds 1 files .* lists 2"):
        get_dataset("image_folder", "train", str(tmp_path))
    (tmp_path / metadata.shard_filename("train", 1, 2)).write_bytes(b"")
    with pytest.raises(ValueError, match=r"train-00000-of-00002.tfrecord is empty but dataset_info.json implies 3"):
        get_dataset("image_folder", "train", str(tmp_path))
    write_tfrecord(str(tmp_path / metadata.shard_filename("train", 0, 2)), [b"record"] * 3)
    write_tfrecord(str(tmp_path / metadata.shard_filename("train", 1, 2)), [b"record"] * 1)
    with pytest.raises(ValueError, match=r"train-00001-of-00002.tfrecord holds 1 records but .* implies 2"):
        get_dataset("image_folder", "train", str(tmp_path))
    write_tfrecord(str(tmp_path / metadata.shard_filename("train", 1, 2)), [b"record"] * 2)
    spec = get_dataset("image_folder", "train", str(tmp_path))
    assert (spec.num_samples, spec.num_classes, spec.image_shape) == (5, 2, (None, None, 3))
    (tmp_path / metadata.METADATA_FILENAME).write_text("{not json")
    with pytest.raises(ValueError, match="not a valid image-folder metadata file"):
        get_dataset("image_folder", "train", str(tmp_path))


# Damaged files -----------------------------------------------------------------------------------------------


def test_corrupt_tfrecord_is_reported_with_its_file_name(tmp_path):
    images = list(np.random.default_rng(3).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8))
    path = cifar_like_dir(str(tmp_path), images, [0, 1, 2, 3])
    content = bytearray(open(path, "rb").read())
    content[len(content) // 2: len(content) // 2 + 16] = bytes(16)
    open(path, "wb").write(bytes(content))
    spec = get_dataset("cifar10", "test", str(tmp_path))
    with pytest.raises(ValueError, match=f"TFRecord file {path} cannot be read .*corrupted record"):
        with spec.read_errors():
            read_all(spec.make_dataset)
    with pytest.raises(ValueError, match="cifar10_test.tfrecord cannot be read"):
        tfrecord_reader.check_tfrecord_file(path)


def test_undecodable_image_in_a_record_is_a_clear_error(tmp_path):
    path = str(tmp_path / "cifar10_test.tfrecord")
    write_tfrecord(path, [tfrecord_format.encode_example(b"\x89PNG broken", "png", 0, 32, 32)])
    spec = get_dataset("cifar10", "test", str(tmp_path))
    with pytest.raises(ValueError, match="dataset 'cifar10' holds an image that is neither valid JPEG nor PNG"):
        with spec.read_errors():
            read_all(spec.make_dataset)


def test_image_of_the_wrong_size_is_a_clear_error(tmp_path):
    (encoded,) = encode_images([np.zeros((28, 28, 3), np.uint8)], "png")
    write_tfrecord(str(tmp_path / "cifar10_test.tfrecord"), [tfrecord_format.encode_example(encoded, "png", 0, 28, 28)])
    spec = get_dataset("cifar10", "test", str(tmp_path))
    with pytest.raises(ValueError, match=r"shape \[28,28,3\] where \[32,32,3\] is expected"):
        with spec.read_errors():
            read_all(spec.make_dataset)


def training_batches(spec) -> tuple:
    """A graph reading ``spec`` as training does (shuffled files, repeated for ever), its next-batch op, a session."""
    graph = tf.Graph()
    with graph.as_default():
        batch = tf.compat.v1.data.make_one_shot_iterator(
            spec.make_dataset(shuffle_files=True, seed=0).repeat().batch(4)).get_next()
    return batch, tf.compat.v1.Session(graph=graph)


@pytest.mark.parametrize("lose", ["removed", "replaced by a dangling link"])
def test_a_shard_lost_mid_run_is_one_error_naming_it(tmp_path, lose):
    """The shard goes while the reader is in its first pass; the next pass reopens it and fails."""
    spec = get_dataset("image_folder", "train", three_class_image_folder(str(tmp_path), num_shards=3))
    batch, session = training_batches(spec)
    lost = spec.files[1]
    with session, pytest.raises(InputDataError) as raised:
        with spec.read_errors():
            session.run(batch)
            os.remove(lost)
            if lose != "removed":
                os.symlink(str(tmp_path / "unmounted" / "shard"), lost)
            for _ in range(100):  # 30 images: a pass is 8 batches
                session.run(batch)
    assert raised.value.path == lost
    assert str(raised.value) == (
        f"TFRecord file {lost} of dataset 'image_folder' is gone (No such file or directory): it was removed, or its "
        "folder unmounted, while the run read it; put it back (or convert the data again), then run the same "
        "command again."
    )


def test_a_shard_that_became_unreadable_is_one_error_naming_it(tmp_path):
    """TensorFlow's own error for a file whose permission was taken away ("<file>; Permission denied"), raised
    here because the tests may run as root, whom no file permission stops."""
    spec = get_dataset("image_folder", "train", three_class_image_folder(str(tmp_path), num_shards=3))
    with pytest.raises(InputDataError) as raised:
        with spec.read_errors():
            raise tf.errors.PermissionDeniedError(None, None, f"Graph execution error:\n\n{spec.files[2]}; "
                                                  "Permission denied\n\t [[{{node IteratorGetNext}}]]")
    assert raised.value.path == spec.files[2]
    assert str(raised.value) == (
        f"TFRecord file {spec.files[2]} of dataset 'image_folder' can no longer be read (Permission denied); give "
        "this user read permission on it, then run the same command again."
    )


def test_a_not_found_error_about_another_file_passes_through(tmp_path):
    spec = get_dataset("image_folder", "train", three_class_image_folder(str(tmp_path), num_shards=3))
    with pytest.raises(tf.errors.NotFoundError):
        with spec.read_errors():
            raise tf.errors.NotFoundError(None, None, "/elsewhere/model.ckpt-5.index; No such file or directory")
