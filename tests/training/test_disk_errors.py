"""A full or read-only disk under --train_dir / --eval_dir: one error naming the folder, the last good checkpoint
and the fix; the failed save leaves nothing behind, and the last good checkpoint still loads.

The disks are real: a small tmpfs mounted for the test (full: a filler file takes the free space;
read-only: the tmpfs is remounted ``ro``). Mounting needs root; the test machine runs the suite as root.
"""

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from argument_errors import raises_naming
from script_runs import (
    EVAL_SCRIPT, LENET_ARGS, TRAIN_SCRIPT, check_bad_input, check_ok, checkpoint_tensor, finish_or_show_stacks,
    run_script, script_env,
)
from slim_mp.config_fields import command_line_message
from slim_mp.train_dir.checkpoint_save import atomic_save
from slim_mp.train_dir.checkpoint_state import TEMP_DIR_PREFIX, latest_checkpoint_note
from slim_mp.train_dir.disk_errors import DiskWriteError, disk_write_errors

tf1 = tf.compat.v1


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs folder, unmounted afterwards."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
                             capture_output=True, text=True, timeout=30)
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs needs root: {mounted.stderr.strip()}")
    try:
        yield str(mount_point)
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, timeout=30)


def fill(folder: str) -> None:
    """Take all the free space of ``folder``'s file system."""
    with open(os.path.join(folder, "filler"), "wb", buffering=0) as handle:
        for chunk in (65536, 4096, 1):
            try:
                while True:
                    handle.write(b"\0" * chunk)
            except OSError:
                pass


def remount_read_only(folder: str) -> None:
    subprocess.run(["mount", "-o", "remount,ro", folder], check=True, timeout=30)


def save_twice(train_dir: str, spoil) -> str:
    """Save step 1, ``spoil`` the disk, save step 2 under ``disk_write_errors``; return the error message."""
    with tf.Graph().as_default():
        weights = tf1.Variable(np.arange(50_000, dtype=np.float32), name="weights")  # 200 kB per checkpoint
        saver = tf1.train.Saver(max_to_keep=None)
        with tf1.Session() as session:
            session.run(weights.initializer)
            atomic_save(saver, session, train_dir, 1)
            spoil(train_dir)
            with pytest.raises(DiskWriteError) as raised:
                with disk_write_errors(train_dir, "train_dir", lambda: latest_checkpoint_note(train_dir)):
                    atomic_save(saver, session, train_dir, 2)
    return command_line_message(raised.value)


def assert_only_step_1_left(train_dir: str) -> None:
    names = os.listdir(train_dir)
    assert not [name for name in names if name.startswith(TEMP_DIR_PREFIX) or "ckpt-2" in name], names
    latest = tf.train.latest_checkpoint(train_dir)
    assert latest.endswith("model.ckpt-1")
    np.testing.assert_array_equal(tf.train.load_checkpoint(latest).get_tensor("weights"), np.arange(50_000))


def test_a_full_disk_names_the_folder_the_last_good_checkpoint_and_the_fix(small_disk):
    message = save_twice(small_disk, fill)
    assert message == (
        f"cannot write to --train_dir={small_disk} (No space left on device); the last good checkpoint, "
        "model.ckpt-1 (step 1), is intact: free space on its disk (or pass another --train_dir), "
        "then run the same command again."
    )
    assert_only_step_1_left(small_disk)


def test_a_read_only_disk_names_the_fix(small_disk):
    message = save_twice(small_disk, remount_read_only)
    assert message.startswith(f"cannot write to --train_dir={small_disk} (Read-only file system); the last good "
                              "checkpoint, model.ckpt-1 (step 1), is intact: remount its file system read-write")
    assert_only_step_1_left(small_disk)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the writer thread's own report
def test_summaries_that_no_longer_fit_name_the_folder(small_disk):
    """The summary writer's thread fails to flush; closing the writer raises that error, which names the folder."""
    summary = tf1.Summary(value=[tf1.Summary.Value(tag="loss", simple_value=1.0)])
    with tf.Graph().as_default():
        writer = tf1.summary.FileWriter(small_disk)
        writer.add_summary(summary, 0)
        writer.flush()
        fill(small_disk)
        with raises_naming("cannot write to --train_dir=" + re.escape(f"{small_disk} (No space")) as raised:
            with disk_write_errors(small_disk, "train_dir", lambda: "nothing lost"):
                for step in range(1, 20_000):  # more than the free space left by the filler
                    writer.add_summary(summary, step)
                writer.close()
    assert isinstance(raised.value, DiskWriteError)


def test_errors_elsewhere_pass_through(small_disk, tmp_path):
    with pytest.raises(FileNotFoundError):
        with disk_write_errors(small_disk, "train_dir", lambda: ""):
            open(tmp_path / "missing" / "file", encoding="utf-8")


@pytest.mark.slow
def test_training_stops_with_one_line_when_the_disk_fills_and_resumes_once_space_is_back(small_disk):
    """A LeNet checkpoint with momentum takes ~26 MB: the disk is made 96 MiB for this run (three checkpoints).

    Evaluation on the full disk then names --eval_dir and leaves no partial metrics file.
    """
    subprocess.run(["mount", "-o", "remount,size=96m", small_disk], check=True, timeout=30)
    train_dir = os.path.join(small_disk, "train")
    process = subprocess.Popen(
        [sys.executable, TRAIN_SCRIPT, f"--train_dir={train_dir}", "--log_every_n_steps=1", "--save_interval_secs=1",
         *LENET_ARGS], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=script_env(),
    )
    try:
        deadline = time.monotonic() + 180
        while tf.train.latest_checkpoint(train_dir) is None:
            assert time.monotonic() < deadline and process.poll() is None, "no first checkpoint"
            time.sleep(0.2)
        fill(small_disk)
        _, stderr = finish_or_show_stacks(process, 120)
    finally:
        if process.poll() is None:
            process.kill()
    check_bad_input(subprocess.CompletedProcess([], process.returncode, "", stderr),
                    f"error: cannot write to --train_dir={train_dir} (No space left on device); the last good "
                    "checkpoint, model.ckpt-")
    saved = int(re.search(r"model\.ckpt-(\d+) \(step", stderr).group(1))
    assert int(checkpoint_tensor(train_dir, "global_step")) == saved
    os.remove(os.path.join(small_disk, "filler"))
    check_ok(run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", f"--max_number_of_steps={saved + 2}", *LENET_ARGS))
    assert int(checkpoint_tensor(train_dir, "global_step")) == saved + 2
    eval_dir = os.path.join(small_disk, "eval")
    os.mkdir(eval_dir)
    fill(small_disk)
    evaluated = run_script(EVAL_SCRIPT, f"--checkpoint_path={train_dir}", f"--eval_dir={eval_dir}",
                           "--max_num_batches=1", "--dataset_name=fashion_mnist", "--model_name=lenet")
    check_bad_input(evaluated, f"error: cannot write to --eval_dir={eval_dir} (No space left on device); "
                               f"{train_dir}/model.ckpt-{saved + 2} is untouched (metrics printed above)")
    assert os.listdir(eval_dir) == []
