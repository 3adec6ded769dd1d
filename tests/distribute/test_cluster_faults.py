"""What a cluster on loopback does when a parameter server dies, the chief restarts, or the launcher gets SIGTERM.

Each scenario runs real processes (one parameter server, two synchronous workers, LeNet on the
bundled data) with every wait bounded. Only what holds in every scheduling order is asserted: which
step a kill lands on varies, so steps are read from the lines and checkpoints the processes leave.
"""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from script_runs import REPO_ROOT, abort_after, finish_or_show_stacks, script_env
from test_local_cluster import (
    CLUSTER_ARGS, CLUSTER_TIMEOUT_S, DYNAMIC_ARGS, LINE, SYNC_ARGS, start_cluster, wait_for_line,
)
from slim_mp.train_dir.checkpoint_state import checkpoint_step

# A worker that lost its parameter server must stop within this many seconds.
LOST_PS_EXIT_S = 60
LAUNCHER = os.path.join(REPO_ROOT, "scripts", "launch_local_cluster.py")
LOST_PS = re.compile(
    r"^\[worker (\d)\] error: lost contact with ps task 0 \((\S+)\) of the cluster \(\w+\); restart it, then "
    r"restart every worker: the chief resumes from (model\.ckpt-(\d+)|its latest checkpoint in --train_dir)"
)


def wait_for_exit(cluster, job_tasks, run, seconds):
    deadline = time.monotonic() + seconds
    while any(cluster.exit_code(job, task) is None for job, task in job_tasks):
        assert time.monotonic() < deadline, f"still running {seconds} s after the fault:\n{run.text()}"
        time.sleep(0.2)


@pytest.mark.slow
def test_a_lost_parameter_server_stops_the_workers_promptly_and_a_restart_resumes(tmp_path, task_command):
    train_dir = str(tmp_path / "train")
    steps = 20
    cluster, run = start_cluster(
        task_command, train_dir,
        ["--precision=bfloat16", f"--max_number_of_steps={steps}", "--save_interval_secs=1", *SYNC_ARGS],
        worker_args={},
    )
    deadline = time.monotonic() + CLUSTER_TIMEOUT_S
    try:
        wait_for_line(run, "[worker 0] step=8 ", deadline)
        cluster.kill_ps(0)
        killed_at = time.monotonic()
        wait_for_exit(cluster, [("worker", 0), ("worker", 1)], run, LOST_PS_EXIT_S)
        stopped_after = time.monotonic() - killed_at
        codes = cluster.exit_code("worker", 0), cluster.exit_code("worker", 1)
        errors = [LOST_PS.match(line) for line in run.lines if re.match(r"^\[worker \d\] error:", line)]
        before_restart = len(run.lines)
        cluster.start_ps(0)
        cluster.start_worker(0)
        cluster.start_worker(1)
        exit_code = cluster.wait_for_chief(timeout=CLUSTER_TIMEOUT_S)  # the restart has a bound of its own
    finally:
        cluster.stop()
    assert codes == (2, 2), run.text()
    assert stopped_after < LOST_PS_EXIT_S
    assert "Traceback" not in run.text()
    assert len(errors) == 2 and all(errors), run.text()
    assert sorted(int(match.group(1)) for match in errors) == [0, 1]
    assert {match.group(2) for match in errors} == {cluster.ps_hosts[0]}
    chief_error = next(match for match in errors if match.group(1) == "0")
    # The chief names the checkpoint it resumes from, unless the ps died before its first save (save interval 1 s):
    # then it names none and starts afresh.
    saved = int(chief_error.group(4)) if chief_error.group(4) is not None else 0
    assert exit_code == 0, run.text()
    resumed = [LINE.match(line) for line in run.lines[before_restart:]]
    chief_steps = [int(match.group(2)) for match in resumed if match and match.group(1) == "0"]
    assert chief_steps[0] == saved + 1 and chief_steps[-1] == steps, run.text()
    assert checkpoint_step(tf.train.latest_checkpoint(train_dir)) == steps


@pytest.mark.slow
def test_sigterm_to_the_launcher_saves_the_chief_first_and_reports_every_task(tmp_path):
    train_dir = str(tmp_path / "train")
    process = subprocess.Popen(
        [sys.executable, LAUNCHER, "--num_ps=1", "--num_workers=2", "--", f"--train_dir={train_dir}", *CLUSTER_ARGS,
         "--precision=bfloat16", *SYNC_ARGS],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=script_env(),
    )
    lines = []
    try:
        with abort_after(process, CLUSTER_TIMEOUT_S):  # a hung cluster fails the test, never hangs it
            for line in process.stdout:
                lines.append(line.rstrip("\n"))
                if line.startswith("[worker 0] step=3 "):
                    process.send_signal(signal.SIGTERM)
                    break
        stdout, stderr = finish_or_show_stacks(process, CLUSTER_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
    lines += stdout.splitlines()
    text = "\n".join(lines[-60:]) + stderr[-2000:]
    assert process.returncode == 143, text
    assert stderr.strip().splitlines()[-1].startswith("error: terminated by SIGTERM; forwarded to the chief"), text
    saved = [re.match(r"^\[worker 0\] error: terminated by SIGTERM at step (\d+); saved (\S+); rerun", line)
             for line in lines]
    saved = [match for match in saved if match]
    assert len(saved) == 1, text
    step = int(saved[0].group(1))
    assert step >= 3 and saved[0].group(2).endswith(f"model.ckpt-{step}")
    assert checkpoint_step(tf.train.latest_checkpoint(train_dir)) == step
    chief_report = "[launcher] worker 0 (the chief) got SIGTERM and exited with status 143"
    assert any(line.startswith(chief_report) for line in lines), text
    for task in ("worker 1", "ps 0"):
        assert any(line.startswith(f"[launcher] {task} stopped: ") for line in lines), text
    assert "Traceback" not in text


@pytest.mark.slow
def test_a_restarted_chief_resynchronises_a_synchronous_job_which_then_finishes(tmp_path, task_command):
    """float16 with dynamic scaling, where a chief killed mid-aggregation most often left the job stalled."""
    train_dir = str(tmp_path / "train")
    steps = 24
    cluster, run = start_cluster(
        task_command, train_dir, ["--precision=float16", f"--max_number_of_steps={steps}", "--save_interval_secs=1",
                                  *DYNAMIC_ARGS, *SYNC_ARGS],
        worker_args={},
    )
    deadline = time.monotonic() + CLUSTER_TIMEOUT_S
    try:
        wait_for_line(run, "[worker 0] step=8 ", deadline)
        cluster.kill_worker(0)
        before_restart = len(run.lines)
        cluster.start_worker(0)
        exit_code = cluster.wait_for_chief(timeout=CLUSTER_TIMEOUT_S)  # the restart has a bound of its own
    finally:
        cluster.stop()
    assert exit_code == 0, run.text()
    after = run.lines[before_restart:]
    assert any("resynchronising the workers" in line for line in after if line.startswith("[worker 0]")), run.text()
    assert checkpoint_step(tf.train.latest_checkpoint(train_dir)) == steps
    assert "Traceback" not in run.text()
