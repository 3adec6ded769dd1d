"""Tasks started as a cluster manager starts them: only ``TF_CONFIG`` (or Slurm's variables) says where the cluster is.

A parameter server and a worker given no cluster flag train LeNet to the same checkpoint as the
flag-started pair; a worker started before its parameter server says it waits for it, trains only
once it is up, and stops at SIGTERM while it waits; each server says in one warning line what its
port lets in; a malformed or contradictory environment is one ``error:`` line. Only what holds in every
scheduling order is asserted (the tasks are forked from a preloaded interpreter: ``conftest.py``).
"""

import json
import os
import signal
import socket
import subprocess
import time

import numpy as np
import pytest

from script_runs import PROGRESS_LINE, check_bad_input, run_script, script_env
from test_local_cluster import CLUSTER_ARGS, CLUSTER_TIMEOUT_S, PS_SCRIPT, TRAIN_SCRIPT, ClusterRun, checkpoint_values
from slim_mp.distribute.local_cluster import LocalCluster, free_loopback_ports

STEPS = 3
OPEN_PORT = "and runs any graph a client sends, with no authentication"
WAITING = "] waiting for ps task 0 (127.0.0.1:"


def local_cluster(task_command, train_dir: str, run: ClusterRun, tf_config: bool) -> LocalCluster:
    """One parameter server and one worker training LeNet for ``STEPS`` steps."""
    return LocalCluster(
        task_command(PS_SCRIPT),
        task_command(TRAIN_SCRIPT, [f"--train_dir={train_dir}", *CLUSTER_ARGS, f"--max_number_of_steps={STEPS}"]),
        num_ps=1, num_workers=1, sink=run.lines.append, env=script_env(), tf_config=tf_config,
    )


def start_a_waiting_worker(cluster: LocalCluster, run: ClusterRun) -> None:
    """Start worker 0 with its parameter server absent; return once it says it waits for it."""
    cluster.start_worker(0)
    deadline = time.monotonic() + CLUSTER_TIMEOUT_S
    while not any(line.startswith("[worker 0]") and WAITING in line for line in run.lines):
        assert time.monotonic() < deadline, f"no waiting line within {CLUSTER_TIMEOUT_S} s:\n{run.text()}"
        time.sleep(0.1)


def worker_steps(run: ClusterRun) -> list:
    prefix = "[worker 0] "
    return [int(match.group("step")) for match in (PROGRESS_LINE.match(line[len(prefix):])
                                                   for line in run.lines if line.startswith(prefix)) if match]


def test_tasks_started_with_only_tf_config_wait_for_each_other_and_train_as_flag_started_ones(tmp_path, task_command):
    flags_dir, tf_config_dir = str(tmp_path / "flags"), str(tmp_path / "tf_config")
    run = ClusterRun(lines=[])
    flag_run = ClusterRun(lines=[])
    by_flags = local_cluster(task_command, flags_dir, flag_run, tf_config=False)
    by_flags.start()
    assert by_flags.wait_for_chief(timeout=CLUSTER_TIMEOUT_S) == 0, flag_run.text()
    by_tf_config = local_cluster(task_command, tf_config_dir, run, tf_config=True)
    try:
        start_a_waiting_worker(by_tf_config, run)  # before its parameter server: it must wait, not train alone
        assert worker_steps(run) == [], run.text()
        assert not any(name.startswith("model.ckpt") for name in os.listdir(tf_config_dir)), run.text()
        by_tf_config.start_ps(0)
        assert by_tf_config.wait_for_chief(timeout=CLUSTER_TIMEOUT_S) == 0, run.text()
    finally:
        by_tf_config.stop()
    assert worker_steps(run) == worker_steps(flag_run) == list(range(1, STEPS + 1)), run.text()
    expected, found = checkpoint_values(flags_dir), checkpoint_values(tf_config_dir)
    assert sorted(found) == sorted(expected) and found["global_step"] == STEPS
    for name, value in expected.items():
        np.testing.assert_array_equal(found[name], value, err_msg=name)
    for task in ("[ps 0]", "[worker 0]"):  # each server says once what its port lets in
        assert sum(line.startswith(task) and OPEN_PORT in line for line in run.lines) == 1, run.text()


def test_a_worker_waiting_for_its_parameter_server_stops_at_sigterm(tmp_path, task_command):
    run = ClusterRun(lines=[])
    cluster = local_cluster(task_command, str(tmp_path / "train"), run, tf_config=True)
    try:
        start_a_waiting_worker(cluster, run)
        cluster.interrupt_chief(signal.SIGTERM)
        assert cluster.exit_code("worker", 0) == 143, run.text()
    finally:
        cluster.stop()
    assert run.lines[-2:] == ["[worker 0] error: terminated by SIGTERM",
                              "[launcher] worker 0 (the chief) got SIGTERM and exited with status 143 (it saves the "
                              "current step first)"], run.text()
    assert worker_steps(run) == []


def non_loopback_address() -> str:
    """This machine's address on its default route (a UDP socket's source; no packet is sent)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1
        return probe.getsockname()[0]
    except OSError:
        return ""
    finally:
        probe.close()


@pytest.mark.parametrize("named", ["loopback", "this machine's network address"])
def test_a_parameter_server_says_once_that_its_port_runs_any_graph(named, task_command):
    """Addressed as loopback, TensorFlow's server still answers on the network address: the warning says so."""
    network = non_loopback_address()
    if not network or network.startswith("127."):
        pytest.skip("this machine has no network address besides loopback")
    ps_port, worker_port = free_loopback_ports(2)
    host = "127.0.0.1" if named == "loopback" else network
    environment = dict(script_env(), TF_CONFIG=json.dumps({
        "cluster": {"ps": [f"{host}:{ps_port}"], "worker": [f"127.0.0.1:{worker_port}"]},
        "task": {"type": "ps", "index": 0}}))
    process = subprocess.Popen(task_command(PS_SCRIPT), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, env=environment, text=True)
    lines = []
    try:
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("parameter server 0 serving on"):
                break
        with socket.create_connection((network, ps_port), timeout=10):
            pass  # the port answers on the network address whatever host TF_CONFIG named
    finally:
        process.kill()
        process.wait()
    warnings = [line for line in lines if OPEN_PORT in line]
    assert lines[-1] == f"parameter server 0 serving on {host}:{ps_port}" and len(warnings) == 1, lines
    if named == "loopback":
        assert f"ps task 0 is addressed as {host}:{ps_port}, but TensorFlow's gRPC server listens on port {ps_port} " \
               "of every network interface of this machine" in warnings[0]
    else:
        assert f"ps task 0 serves {host}:{ps_port} {OPEN_PORT}: anyone who can reach that port can run code" \
               in warnings[0]


KUBEFLOW = {"ps": ["job-ps-0:2222"], "worker": ["job-worker-0:2222", "job-worker-1:2222"]}
SLURM_STEP = {"SLURM_JOB_ID": "4242", "SLURM_PROCID": "0", "SLURM_STEP_NODELIST": "node[1-3]",
              "SLURM_STEP_TASKS_PER_NODE": "1(x3)", "SLURM_STEP_NUM_TASKS": "3"}


def tf_config(task_type: str, index: int) -> dict:
    return {"TF_CONFIG": json.dumps({"cluster": KUBEFLOW, "task": {"type": task_type, "index": index}})}


@pytest.mark.parametrize("script, args, environment, expected", [
    (TRAIN_SCRIPT, [], {"TF_CONFIG": '{"cluster": '}, "error: TF_CONFIG is not valid JSON (Expecting value"),
    (PS_SCRIPT, [], {"TF_CONFIG": '{"cluster": {}}'}, 'error: TF_CONFIG has no "task"; set it as the cluster '
     'manager does, e.g. {"cluster": {"ps": ["ps0:2222"], "worker": ["w0:2222", "w1:2222"]}, "task": {"type": '
     '"worker", "index": 0}} (docs/operations.md).'),
    (TRAIN_SCRIPT, [], tf_config("ps", 0), "error: TF_CONFIG makes this process ps task 0, which "
     "scripts/parameter_server.py runs, not scripts/train_image_classifier.py; start it with that script."),
    (PS_SCRIPT, [], tf_config("worker", 1), "error: TF_CONFIG makes this process worker task 1, which "
     "scripts/train_image_classifier.py runs, not scripts/parameter_server.py; start it with that script."),
    (TRAIN_SCRIPT, ["--task=0", "--worker_replicas=3"], tf_config("worker", 1),
     "error: --worker_replicas=3 contradicts TF_CONFIG, which gives 2; drop --worker_replicas"),
    (TRAIN_SCRIPT, ["--num_ps_tasks=1"], SLURM_STEP, "error: Slurm's SLURM_PROCID=0 makes this process ps task 0, "
     "which scripts/parameter_server.py runs"),
    (PS_SCRIPT, ["--num_ps_tasks=1"], {"SLURM_JOB_ID": "4242"}, "error: --num_ps_tasks=1 without --ps_hosts reads "
     "the cluster from srun, but SLURM_PROCID is not set: this process runs in Slurm job 4242 outside a step"),
])
def test_the_scripts_refuse_an_environment_they_cannot_run_in_one_line(script, args, environment, expected,
                                                                       monkeypatch):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    check_bad_input(run_script(script, *args), expected)
