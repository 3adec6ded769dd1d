"""The official-style script with the README's lines (``train_step_fn=slim_mp.train_step`` in its
``slim.learning.train`` call), run as a user runs it, in a process of its own, with slim's defaults.

- SIGTERM mid-training: the latest checkpoint is the current step (without the step function,
  slim's Supervisor leaves ``model.ckpt-0``, saved at the start); the script ends normally.
- A float16 run at a learning rate that diverges: the output ends with one ``error:`` sentence
  naming the first non-finite op (a float16 cast of conv1's variables, which the first step's
  update at 1e6 pushes beyond float16's range), with no traceback.
- Progress lines show the loss scale and the skipped steps.
"""

import re
import signal
import subprocess
import sys

import tensorflow as tf

import script_runs
from test_user_training_script import SCRIPT, _official_records

PROGRESS = re.compile(r"\] (step=(\d+) loss=\S+ loss_scale=(\S+) skipped=(\d+) images/s=\d+)$")


def _command(tmp_path, write_official_records, *args: str) -> list:
    data_dir = tmp_path / "data"
    data_dir.mkdir(exist_ok=True)
    _official_records(data_dir, write_official_records, train_count=160, test_count=32)
    return [sys.executable, SCRIPT, "--mode=train", f"--dataset_dir={data_dir}", "--num_samples=160",
            "--batch_size=8", *args]


def test_sigterm_during_slim_training_saves_the_current_step(tmp_path, write_official_records):
    train_dir = tmp_path / "train"
    process = subprocess.Popen(
        _command(tmp_path, write_official_records, f"--train_dir={train_dir}", "--max_number_of_steps=100000",
                 "--log_every_n_steps=5", "--precision=bfloat16"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=script_runs.script_env())
    lines = []
    try:
        for line in process.stderr:
            lines.append(line)
            progress = PROGRESS.search(line.rstrip())
            if progress and int(progress.group(2)) >= 20:
                last_printed = int(progress.group(2))
                process.send_signal(signal.SIGTERM)
                break
        stdout, stderr = process.communicate(timeout=script_runs.TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
    stderr = "".join(lines) + stderr
    assert process.returncode == 0, stderr[-3000:]
    terminated = re.search(r"terminated by SIGTERM at step (\d+); stopping so that slim.learning.train's final "
                           r"save saves model.ckpt-(\d+); rerun the same command to resume", stderr)
    assert terminated, stderr[-3000:]
    step = int(terminated.group(1))
    assert step >= last_printed and int(terminated.group(2)) == step
    assert tf.train.latest_checkpoint(str(train_dir)).endswith(f"model.ckpt-{step}")
    assert "Traceback" not in stderr


def test_a_diverging_float16_run_ends_with_one_sentence_naming_the_first_nonfinite_op(tmp_path,
                                                                                      write_official_records):
    process = subprocess.run(
        _command(tmp_path, write_official_records, f"--train_dir={tmp_path / 'train'}", "--max_number_of_steps=50",
                 "--log_every_n_steps=1", "--precision=float16", "--learning_rate=1e6", "--debug_nonfinite"),
        capture_output=True, text=True, env=script_runs.script_env(), timeout=script_runs.TIMEOUT_S)
    assert process.returncode == 1, process.stderr[-3000:]
    assert "Traceback" not in process.stderr and "Detected at node" not in process.stderr
    last = process.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        r"error: The loss is inf or NaN; lower --learning_rate or check the input data \(at step 2\)\. "
        r"Diagnosis \(--mp_debug_nonfinite\): the first non-finite value came from op 'conv1/[^']+' "
        r"\(Cast, forward pass, low precision \(float16\)\) at loss scale 32768\.", last), last
    progress = [match.group(1) for match in map(PROGRESS.search, process.stderr.splitlines()) if match]
    assert progress and progress[0].startswith("step=1 ") and " loss_scale=32768 skipped=0 " in progress[0]
