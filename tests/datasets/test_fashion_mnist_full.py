"""The full Fashion-MNIST from its Debian package's IDX files: read from tiny files the test writes, and the errors.

CI machines do not have the package; every test writes its own IDX files (or none) and points the
module's package folder or ``--dataset_dir`` at them.
"""

import os

import numpy as np
import pytest

from argument_errors import raises_naming
from datasets_support import read_all, write_idx
from script_runs import REPO_ROOT, check_bad_input, run_script
from slim_mp.config_fields import command_line_message
from slim_mp.datasets import fashion_mnist_full, get_dataset

PACKAGE_INSTALL = "apt-get install dataset-fashion-mnist"


def write_split(directory, prefix: str, images: np.ndarray, labels: np.ndarray) -> None:
    """Write ``<prefix>-images-idx3-ubyte.gz`` and ``<prefix>-labels-idx1-ubyte.gz`` as the package ships them."""
    write_idx(str(directory / f"{prefix}-images-idx3-ubyte.gz"), images)
    write_idx(str(directory / f"{prefix}-labels-idx1-ubyte.gz"), labels)


@pytest.fixture
def package_dir(tmp_path, monkeypatch):
    """A stand-in for the package's folder holding a 6-image train and a 4-image test split."""
    rng = np.random.default_rng(3)
    write_split(tmp_path, "train", rng.integers(0, 256, (6, 28, 28), dtype=np.uint8), np.array([0, 1, 2, 3, 4, 9]))
    write_split(tmp_path, "t10k", rng.integers(0, 256, (4, 28, 28), dtype=np.uint8), np.array([5, 6, 7, 8]))
    monkeypatch.setattr(fashion_mnist_full, "DEBIAN_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("split_name, prefix, size", [("train", "train", 6), ("test", "t10k", 4)])
def test_the_full_set_is_read_from_the_package_folder_without_a_dataset_dir(package_dir, split_name, prefix, size):
    spec = get_dataset("fashion_mnist_full", split_name)
    images, labels = read_all(spec.make_dataset)
    assert (spec.name, spec.split, spec.num_samples, spec.num_classes) == ("fashion_mnist_full", split_name, size, 10)
    assert spec.image_shape == (28, 28, 1) and spec.files == ()
    expected_images, expected_labels = fashion_mnist_full.fashion_mnist.load_idx(str(package_dir), split_name)
    np.testing.assert_array_equal(images[..., 0], expected_images)
    np.testing.assert_array_equal(labels, expected_labels)


def test_a_dataset_dir_replaces_the_package_folder(package_dir, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    write_split(elsewhere, "t10k", np.full((3, 28, 28), 7, np.uint8), np.array([1, 1, 2]))
    spec = get_dataset("fashion_mnist_full", "test", str(elsewhere))
    assert spec.num_samples == 3 and read_all(spec.make_dataset)[1].tolist() == [1, 1, 2]


def test_the_missing_package_is_one_error_naming_it_and_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(fashion_mnist_full, "DEBIAN_DIR", str(tmp_path / "not_installed"))
    with raises_naming("^--dataset_name=fashion_mnist_full reads the Debian package dataset-fashion-mnist, which "
                       "is not installed") as raised:
        get_dataset("fashion_mnist_full", "test")
    message = command_line_message(raised.value)
    assert PACKAGE_INSTALL in message and "t10k-images-idx3-ubyte.gz is missing" in message
    assert "--dataset_dir" in message and "--dataset_name=fashion_mnist for the bundled" in message


@pytest.mark.parametrize("name", ["fashion_mnist", "fashion_mnist_full"])
def test_a_dataset_dir_without_the_split_names_the_flag_the_file_and_the_package(tmp_path, name):
    write_idx(str(tmp_path / "train-images-idx3-ubyte.gz"), np.zeros((2, 28, 28), np.uint8))  # labels missing
    with raises_naming(f"^--dataset_dir={tmp_path} holds no train-labels-idx1-ubyte.gz") as raised:
        get_dataset(name, "train", str(tmp_path))
    assert PACKAGE_INSTALL in str(raised.value)


def test_unknown_split_names_the_dataset(package_dir):
    with pytest.raises(ValueError, match="dataset 'fashion_mnist_full' has no split 'validation'"):
        get_dataset("fashion_mnist_full", "validation")


def test_a_script_asked_for_the_full_set_that_is_missing_exits_2_with_one_error_line(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    process = run_script(os.path.join(REPO_ROOT, "scripts", "train_image_classifier.py"),
                         f"--train_dir={tmp_path / 'train'}", "--dataset_name=fashion_mnist_full",
                         f"--dataset_dir={empty}", "--model_name=lenet", "--max_number_of_steps=1")
    check_bad_input(process, f"error: --dataset_dir={empty} holds no train-images-idx3-ubyte.gz")
    assert PACKAGE_INSTALL in process.stderr
