"""Faults that meet a user's own loop, tried as the user meets them: the official-style script, run in processes
of its own, with ``slim.learning.train`` and the step function or (``--loop=monitored``) a
``MonitoredTrainingSession`` with ``TrainStepHook`` (the lines of docs/compatibility.md).

- A second process in a train dir already training is refused with one ``error:`` naming the
  holder; the first, sent SIGTERM, finishes its step, saves it with slim's final save (without the
  step function slim's Supervisor leaves ``model.ckpt-0``, saved at the start) and exits 143 as
  our script does.
- A damaged latest checkpoint is named in one sentence with the intact one to resume from;
  ``slim_mp.set_aside_damaged_checkpoints`` moves it aside, and the same command resumes.
- A shard damaged while the run reads it: one sentence naming the file and the checkpoint the loop
  saved at its last completed step.
- NaN in the input batch is named as the input's, not as the op that first reads it.

Concurrent runs assert only what holds in every order: the second run starts after the first has
taken the lock (at its first step), and the damage is met at whatever step the run has reached.
"""

import os
import re
import signal
import subprocess
import sys
from typing import List, Tuple

import pytest
import tensorflow as tf

import script_runs
import slim_mp
from test_user_training_script import SCRIPT, _official_records

STEP = re.compile(r"\] step=(\d+) ")


@pytest.fixture
def data_dir(tmp_path, write_official_records):
    folder = tmp_path / "data"
    folder.mkdir()
    _official_records(folder, write_official_records, train_count=160, test_count=32)
    return folder


def _command(data_dir, train_dir, *args: str) -> List[str]:
    return [sys.executable, SCRIPT, "--mode=train", f"--dataset_dir={data_dir}", "--num_samples=160", "--batch_size=8",
            f"--train_dir={train_dir}", "--precision=bfloat16", "--log_every_n_steps=1", *args]


def _run(command: List[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, env=script_runs.script_env(),
                          timeout=script_runs.TIMEOUT_S)


def _run_until_step(command: List[str], step: int, then) -> Tuple[subprocess.Popen, str]:
    """Start ``command``; once it logs a progress line at ``step`` or later, call ``then(process)``; let it finish.

    Returns the process and all it wrote to stderr.
    """
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=script_runs.script_env())
    lines = []
    try:
        with script_runs.abort_after(process, script_runs.TIMEOUT_S):
            for line in process.stderr:
                lines.append(line)
                reached = STEP.search(line)
                if reached and int(reached.group(1)) >= step:
                    then(process)
                    break
        _, rest = script_runs.finish_or_show_stacks(process, script_runs.TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
    return process, "".join(lines) + rest


def _last_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr[-3000:]
    return stderr.strip().splitlines()[-1]


def test_a_second_process_in_the_train_dir_is_refused_and_the_first_exits_143_on_sigterm(data_dir, tmp_path):
    train_dir = tmp_path / "train"
    second = []

    def run_the_second_then_stop_the_first(first: subprocess.Popen) -> None:
        second.append(_run(_command(data_dir, train_dir, "--loop=monitored", "--max_number_of_steps=5")))
        first.send_signal(signal.SIGTERM)

    first, stderr = _run_until_step(_command(data_dir, train_dir, "--max_number_of_steps=100000"), 20,
                                    run_the_second_then_stop_the_first)
    (refused,) = second
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert re.fullmatch(
        rf"error: checkpoint_dir={re.escape(str(train_dir))} is in use by another training process \(pid {first.pid} "
        r"on host \S+\); wait for it to finish, stop it, or pass another checkpoint_dir\.", _last_line(refused.stderr))
    assert first.returncode == 143, stderr[-3000:]
    terminated = re.search(r"terminated by SIGTERM at step (\d+); stopping so that slim.learning.train's final save "
                           r"saves model.ckpt-(\d+); rerun the same command to resume", stderr)
    assert terminated and terminated.group(1) == terminated.group(2), stderr[-3000:]
    assert int(terminated.group(1)) >= 20
    assert tf.train.latest_checkpoint(str(train_dir)).endswith(f"model.ckpt-{terminated.group(1)}")
    assert "Traceback" not in stderr


def _truncated(path: str) -> None:
    os.truncate(path, 100)


def _byte_flipped(path: str) -> None:
    with open(path, "r+b") as handle:
        handle.seek(os.path.getsize(path) // 2)
        byte = handle.read(1)[0]
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte ^ 0xFF]))


# Three runs each; tests/seams/test_error_lines.py checks the sentence in-process in the default suite.
@pytest.mark.slow
@pytest.mark.parametrize("damage, loop", [(_truncated, "monitored"), (_byte_flipped, "slim")])
def test_a_damaged_latest_checkpoint_is_named_with_the_intact_one_and_set_aside(damage, loop, data_dir, tmp_path):
    train_dir = tmp_path / "train"
    trained = _run(_command(data_dir, train_dir, "--max_number_of_steps=4"))
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert tf.train.latest_checkpoint(str(train_dir)).endswith("model.ckpt-4")
    (data_file,) = [name for name in os.listdir(train_dir) if name.startswith("model.ckpt-4.data-")]
    damage(str(train_dir / data_file))

    resumed = _run(_command(data_dir, train_dir, f"--loop={loop}", "--max_number_of_steps=8"))
    assert resumed.returncode == 1, resumed.stderr[-3000:]
    loop_name = {"slim": "slim.learning.train", "monitored": "MonitoredTrainingSession"}[loop]
    argument = {"slim": "logdir", "monitored": "checkpoint_dir"}[loop]
    assert _last_line(resumed.stderr) == (
        f"error: {loop_name} cannot restore the latest checkpoint of {argument}={train_dir}: {data_file} is damaged "
        f"or truncated; model.ckpt-0 is intact: call slim_mp.set_aside_damaged_checkpoints({str(train_dir)!r}) to "
        "move the damaged one(s) into damaged/, then run the same command again to resume from model.ckpt-0.")

    assert slim_mp.set_aside_damaged_checkpoints(str(train_dir)) == ("model.ckpt-4",)
    assert sorted(os.listdir(train_dir / "damaged")) == sorted(
        name for name in (data_file, "model.ckpt-4.index", "model.ckpt-4.meta"))
    again = _run(_command(data_dir, train_dir, f"--loop={loop}", "--max_number_of_steps=8"))
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"Restoring parameters from {train_dir}/model.ckpt-0" in again.stderr
    assert tf.train.latest_checkpoint(str(train_dir)).endswith("model.ckpt-8")


def test_a_shard_truncated_mid_run_is_named_with_the_checkpoint_of_the_last_completed_step(data_dir, tmp_path):
    train_dir = tmp_path / "train"
    shard = data_dir / "mnist_train.tfrecord"
    process, stderr = _run_until_step(
        _command(data_dir, train_dir, "--max_number_of_steps=100000"), 3,
        lambda process: os.truncate(shard, os.path.getsize(shard) // 2))
    assert process.returncode == 1, stderr[-3000:]
    saved = re.fullmatch(
        rf"error: TFRecord file {re.escape(str(shard))} cannot be read \(truncated record at \d+\); replace it by "
        r"running its converter again; slim.learning.train saved (\S+), its last completed step: rerun the same "
        r"command to resume once the input is fixed\.", _last_line(stderr))
    assert saved, _last_line(stderr)
    last_step = max(int(match.group(1)) for match in STEP.finditer(stderr))
    assert saved.group(1) == tf.train.latest_checkpoint(str(train_dir)) and saved.group(1).endswith(
        f"model.ckpt-{last_step}")


def test_nan_in_the_input_batch_is_named_as_the_inputs(data_dir, tmp_path):
    # Every image read from step 2 on holds a NaN pixel: every step is skipped until the guard stops the run.
    process = _run(_command(data_dir, tmp_path / "train", "--max_number_of_steps=12", "--debug_nonfinite",
                            "--nan_pixel_from_step=2"))
    assert process.returncode == 1, process.stderr[-3000:]
    input_nan = "the input batch already held NaN (features, 'batch:0')"
    skipped = re.findall(r"step \d+ was skipped for non-finite gradients: (.*)$", process.stderr, re.MULTILINE)
    assert skipped and set(skipped) == {input_nan}, process.stderr[-3000:]
    last = _last_line(process.stderr)
    assert last.startswith("error: Training diverged: 100 steps in a row were skipped") and last.endswith(
        f"Diagnosis (debug_nonfinite=True): {input_nan}."), last
