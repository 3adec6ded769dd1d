"""One writing process per --train_dir: a second one is refused by name, a killed one's lock is taken over,
and a save never deletes another live process's temporaries."""

import os
import signal
import socket
import subprocess
import sys

import pytest
import tensorflow as tf

from script_runs import (LENET_ARGS, TRAIN_SCRIPT, abort_after, check_ok, checkpoint_tensor, run_script, script_env,
                         sigint_as_in_a_terminal)
from slim_mp.train_dir.checkpoint_save import atomic_save
from slim_mp.train_dir.checkpoint_state import TEMP_DIR_PREFIX
from slim_mp.train_dir.folder_lock import LOCK_FILENAME

tf1 = tf.compat.v1
FAST = ("--batch_size=8", "--log_every_n_steps=1")


def start_training(train_dir):
    """Start an endless training run; return it once it has printed its first progress line (it holds the lock)."""
    process = subprocess.Popen(
        [sys.executable, TRAIN_SCRIPT, f"--train_dir={train_dir}", *LENET_ARGS, *FAST],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=script_env(),
        preexec_fn=sigint_as_in_a_terminal,
    )
    with abort_after(process, 120):
        for line in process.stdout:
            if line.startswith("step="):
                return process
    process.kill()
    raise AssertionError("the first training run printed no progress line")


@pytest.mark.slow
def test_a_second_writer_is_refused_naming_the_first_and_the_lock_is_released_on_exit(tmp_path):
    train_dir = str(tmp_path / "shared")
    first = start_training(train_dir)
    try:
        second = run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", "--max_number_of_steps=1", *LENET_ARGS)
        assert second.returncode == 2
        assert "Traceback" not in second.stderr
        assert second.stderr.strip().splitlines()[-1] == (
            f"error: --train_dir={train_dir} is in use by another training process "
            f"(pid {first.pid} on host {socket.gethostname()}); wait for it to finish, stop it, "
            "or pass another --train_dir."
        )
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=120)
    assert first.returncode == 130
    with open(os.path.join(train_dir, LOCK_FILENAME), encoding="utf-8") as handle:
        assert handle.read() == ""  # released: no holder named
    interrupted_at = int(checkpoint_tensor(train_dir, "global_step"))
    check_ok(run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", f"--max_number_of_steps={interrupted_at + 1}",
                        *LENET_ARGS, *FAST))
    assert checkpoint_tensor(train_dir, "global_step") == interrupted_at + 1


@pytest.mark.slow
def test_the_lock_of_a_killed_process_is_taken_over_with_a_warning(tmp_path):
    train_dir = str(tmp_path / "killed")
    killed = start_training(train_dir)
    killed.kill()  # SIGKILL: no cleanup runs, the lock file still names it
    killed.communicate(timeout=60)
    process = check_ok(run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", "--max_number_of_steps=1",
                                  *LENET_ARGS, *FAST))
    warnings = [line for line in process.stderr.splitlines() if "taking over the lock" in line]
    assert len(warnings) == 1 and f"pid {killed.pid} on host {socket.gethostname()}" in warnings[0]


def test_a_save_keeps_the_temporaries_of_a_live_process_and_removes_those_of_a_dead_one(tmp_path):
    train_dir = str(tmp_path)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    live_temp = f"{TEMP_DIR_PREFIX}{host}-{live.pid}-abc123"
    dead_temp = f"{TEMP_DIR_PREFIX}{host}-{dead.pid}-def456"
    try:
        for name in (live_temp, dead_temp):
            os.makedirs(os.path.join(train_dir, name))
        graph = tf.Graph()
        with graph.as_default():
            tf1.Variable(1.0, name="weight")
            saver = tf1.train.Saver(max_to_keep=None)
            with tf1.Session() as session:
                session.run(tf1.global_variables_initializer())
                atomic_save(saver, session, train_dir, 1)
        temporaries = sorted(name for name in os.listdir(train_dir) if name.startswith(TEMP_DIR_PREFIX))
        assert temporaries == [live_temp]
    finally:
        live.kill()
        live.wait()
