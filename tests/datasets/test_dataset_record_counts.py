"""A converted dataset whose shard lost records (emptied, cut short, rewritten shorter) is named, never half-read."""

import os
import shutil

import pytest
import tensorflow as tf

from datasets_support import three_class_image_folder
from script_runs import LENET_ARGS, TRAIN_SCRIPT, check_ok, run_script

SHARD = "train-00001-of-00003.tfrecord"


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """30 images of three classes in three shards of 10."""
    return three_class_image_folder(str(tmp_path_factory.mktemp("counts")), num_shards=3)


def keep_records(path, count):
    records = list(tf.data.TFRecordDataset(path).take(count).as_numpy_iterator())
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)


DAMAGE = {
    "emptied": (lambda path: open(path, "wb").close(), f"{SHARD} is empty but dataset_info.json implies 10"),
    "rewritten shorter": (lambda path: keep_records(path, 4), f"{SHARD} holds 4 records but dataset_info.json "
                                                             "implies 10"),
    "cut mid-record": (lambda path: os.truncate(path, os.path.getsize(path) - 100), f"{SHARD} is truncated after 9 "
                                                                                     "records"),
}


def train(dataset_dir, tmp_path):
    return run_script(TRAIN_SCRIPT, f"--train_dir={tmp_path / 'run'}", "--max_number_of_steps=1", *LENET_ARGS,
                      "--dataset_name=image_folder", f"--dataset_dir={dataset_dir}", "--batch_size=8")


def test_intact_conversion_trains(converted, tmp_path):
    check_ok(train(converted, tmp_path))


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_shard_missing_records_is_named_in_one_error_line(case, converted, tmp_path):
    damage, message = DAMAGE[case]
    dataset_dir = str(tmp_path / "records")
    shutil.copytree(converted, dataset_dir)
    damage(os.path.join(dataset_dir, SHARD))
    process = train(dataset_dir, tmp_path)
    assert process.returncode == 2, process.stderr[-2000:]
    assert "Traceback" not in process.stderr
    last = process.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and message in last, last
    assert "converter again" in last or "convert_image_folder.py again" in last, last
