"""Faults a run meets from outside, tried with the scripts as a user runs them: data that goes away mid-run."""

import os
import subprocess

import pytest

from datasets_support import three_class_image_folder
from script_runs import (
    TRAIN_SCRIPT, abort_after, check_bad_input, finish_or_show_stacks, preloaded_tasks, script_env,
)

TIMEOUT_S = 120


@pytest.fixture(scope="module")
def task_command():
    """Command lines of scripts that stream their output, forked from one preloaded interpreter."""
    with preloaded_tasks() as command:
        yield command


def test_a_shard_removed_mid_run_ends_training_with_one_error_naming_it(tmp_path, task_command):
    """Training without a step limit: the run can only end by the removed shard, whenever its next pass comes."""
    records = three_class_image_folder(str(tmp_path), num_shards=3)
    removed = os.path.join(records, "train-00001-of-00003.tfrecord")
    process = subprocess.Popen(
        task_command(TRAIN_SCRIPT, [f"--train_dir={tmp_path / 'train'}", "--dataset_name=image_folder",
                                    f"--dataset_dir={records}", "--model_name=lenet", "--batch_size=4",
                                    "--log_every_n_steps=1", "--num_preprocessing_threads=1"]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=script_env())
    try:
        with abort_after(process, TIMEOUT_S):
            for line in process.stdout:
                if line.startswith("step="):
                    os.remove(removed)
                    break
        stdout, stderr = finish_or_show_stacks(process, TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
    check_bad_input(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr),
                    f"error: TFRecord file {removed} of dataset 'image_folder' is gone (No such file or directory)")
