"""A shard damaged or removed while training runs: the last completed step is saved, and one error names the shard.

The default ``--save_interval_secs=600`` writes no checkpoint in a short run, so without the save on
the way out every step would be lost. The data set is three shards of 10 images at batch 8: the
pipeline opens each shard again every few steps, so the damage is met soon after it is done, at
whatever step the run has reached by then (the test asserts only what holds for any such step).
"""

import os
import re
import subprocess
import sys

import pytest

from datasets_support import three_class_image_folder
from script_runs import (LENET_ARGS, TIMEOUT_S, TRAIN_SCRIPT, abort_after, checkpoint_tensor, finish_or_show_stacks,
                         script_env)

SHARD = "train-00001-of-00003.tfrecord"
SAVED = re.compile(r"; saved (\S+), its last completed step \(step (\d+)\): rerun the same command to resume once "
                   r"the input is fixed\.$")

DAMAGE = {
    "cut mid-record": (lambda path: os.truncate(path, os.path.getsize(path) - 100), f"{SHARD} cannot be read"),
    "removed": (os.remove, f"{SHARD} of dataset 'image_folder' is gone (No such file or directory)"),
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    return three_class_image_folder(str(tmp_path_factory.mktemp("shards")), num_shards=3)


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_shard_broken_mid_run_ends_with_its_name_and_the_last_step_saved(case, converted, tmp_path):
    damage, named = DAMAGE[case]
    dataset_dir, train_dir = tmp_path / "records", tmp_path / "run"
    subprocess.run(["cp", "-r", converted, str(dataset_dir)], check=True)
    process = subprocess.Popen(
        [sys.executable, TRAIN_SCRIPT, f"--train_dir={train_dir}", "--max_number_of_steps=100000",
         "--log_every_n_steps=1", *LENET_ARGS, "--dataset_name=image_folder", f"--dataset_dir={dataset_dir}",
         "--batch_size=8"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=script_env())
    try:
        with abort_after(process, TIMEOUT_S):
            for line in process.stdout:
                if line.startswith("step=3 "):
                    damage(str(dataset_dir / SHARD))
                    break
        _, stderr = finish_or_show_stacks(process, TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 2, stderr[-3000:]
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    saved = SAVED.search(last)
    assert last.startswith("error: ") and named in last and saved, last
    step = int(saved.group(2))
    assert step >= 3 and saved.group(1).endswith(f"model.ckpt-{step}")
    assert checkpoint_tensor(str(train_dir), "global_step") == step
