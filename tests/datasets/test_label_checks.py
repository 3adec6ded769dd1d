"""A label outside the data set's classes stops reading with one error naming the shard, the record and the label."""

import numpy as np
import pytest

from datasets_support import read_all
from script_runs import EVAL_SCRIPT, TRAIN_SCRIPT, check_bad_input, check_ok, run_script
from slim_mp.datasets import fashion_mnist, get_dataset
from slim_mp.datasets.label_checks import check_array_labels
from test_datasets import cifar_like_dir

IMAGES = list(np.random.default_rng(5).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8))


@pytest.mark.parametrize("bad_label", [99, 10, -1])
def test_a_record_with_a_label_out_of_range_is_named(tmp_path, bad_label):
    path = cifar_like_dir(str(tmp_path), IMAGES, [0, 1, bad_label, 3])
    spec = get_dataset("cifar10", "test", str(tmp_path))
    with pytest.raises(ValueError) as raised:
        with spec.read_errors():
            read_all(spec.make_dataset)
    assert str(raised.value).startswith(
        f"shard {path} record 2 has label {bad_label}, outside the 10 classes (0 to 9) of dataset 'cifar10'"
    )


def test_labels_in_range_read_unchanged(tmp_path):
    cifar_like_dir(str(tmp_path), IMAGES, [0, 9, 5, 3])
    spec = get_dataset("cifar10", "test", str(tmp_path))
    with spec.read_errors():
        _, labels = read_all(spec.make_dataset)
    assert labels.tolist() == [0, 9, 5, 3]


def test_in_memory_labels_are_checked_against_the_class_count():
    _, labels = fashion_mnist.load_bundled("test")
    check_array_labels(labels, 10, "bundled", "fashion_mnist")
    damaged = labels.copy()
    damaged[7] = 12
    with pytest.raises(ValueError, match=r"^example 7 of bundled has label 12, outside the 10 classes"):
        check_array_labels(damaged, 10, "bundled", "fashion_mnist")


@pytest.mark.slow
def test_training_and_evaluation_stop_on_the_bad_record(tmp_path):
    """With --labels_offset=1 the upper bound is unchanged: raw label 10 is still outside classes 0..9."""
    good_dir, bad_dir = tmp_path / "good", tmp_path / "bad"
    good_dir.mkdir()
    bad_dir.mkdir()
    cifar_like_dir(str(good_dir), IMAGES, [1, 2, 9, 3])
    path = cifar_like_dir(str(bad_dir), IMAGES, [1, 2, 10, 3])
    common = ("--dataset_name=cifar10", "--dataset_split_name=test", "--model_name=lenet", "--batch_size=2",
              "--num_preprocessing_threads=1", "--labels_offset=1")
    train_dir = str(tmp_path / "train")
    check_ok(run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", f"--dataset_dir={good_dir}",
                        "--max_number_of_steps=1", *common))
    expected = f"error: shard {path} record 2 has label 10, outside the 10 classes"
    evaluated = run_script(EVAL_SCRIPT, f"--checkpoint_path={train_dir}", f"--eval_dir={tmp_path / 'eval'}",
                           f"--dataset_dir={bad_dir}", *common)
    check_bad_input(evaluated, expected)
    trained = run_script(TRAIN_SCRIPT, f"--train_dir={tmp_path / 'bad_train'}", f"--dataset_dir={bad_dir}",
                         "--max_number_of_steps=4", *common)
    check_bad_input(trained, expected)
