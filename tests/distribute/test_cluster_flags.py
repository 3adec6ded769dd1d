"""Clone and cluster options: contradictions are refused before any work, naming the argument to a library caller
and the flag on a command line; the launcher CLI."""

import dataclasses
import os
import re

import pytest

from script_runs import REPO_ROOT, check_bad_input, run_script
from slim_mp.config_fields import command_line_message
from slim_mp.distribute import CloneDevices, make_cluster_layout
from slim_mp.distribute.cluster import ParameterServerConfig, serve_parameter_server
from slim_mp.distribute.local_cluster import LocalCluster, check_train_args, free_loopback_ports
from slim_mp.training import cli
from slim_mp.training.train_config import TrainConfig, check_train_config

LAUNCHER = os.path.join(REPO_ROOT, "scripts", "launch_local_cluster.py")
PS_SCRIPT = os.path.join(REPO_ROOT, "scripts", "parameter_server.py")
TWO_HOSTS = ("127.0.0.1:2222", "127.0.0.1:2223")

INCONSISTENT = {
    "task out of range": ({"worker_replicas": 2, "num_ps_tasks": 1, "task": 2, "worker_hosts": TWO_HOSTS,
                           "ps_hosts": ("127.0.0.1:2224",)}, "--task=2 is out of range"),
    "negative task": ({"task": -1}, "--task=-1 is out of range"),
    "replicas without ps": ({"worker_replicas": 2}, "--worker_replicas=2 needs parameter servers"),
    "sync with one replica": ({"sync_replicas": True}, "--sync_replicas needs several workers"),
    "ps without addresses": ({"num_ps_tasks": 1}, "--num_ps_tasks=1 needs a cluster"),
    "too few worker hosts": ({"worker_replicas": 2, "num_ps_tasks": 1, "worker_hosts": TWO_HOSTS[:1],
                              "ps_hosts": ("127.0.0.1:2224",)}, "--worker_hosts lists 1 address(es)"),
    "bad host": ({"num_ps_tasks": 1, "worker_hosts": ("localhost",), "ps_hosts": ("127.0.0.1:2224",)},
                 "--worker_hosts entry 'localhost' is not host:port"),
    "master and hosts": ({"num_ps_tasks": 1, "master": "grpc://127.0.0.1:2222", "worker_hosts": TWO_HOSTS[:1],
                          "ps_hosts": ("127.0.0.1:2224",)}, "pass only one"),
    "no clones": ({"num_clones": 0}, "--num_clones=0 must be a positive integer"),
    "zero replicas to aggregate": ({"worker_replicas": 2, "num_ps_tasks": 1, "worker_hosts": TWO_HOSTS,
                                    "ps_hosts": ("127.0.0.1:2224",), "sync_replicas": True,
                                    "replicas_to_aggregate": 0}, "--replicas_to_aggregate=0"),
    "fault step zero": ({"fault_nonfinite_steps": (0,)}, "--fault_nonfinite_steps holds [0]"),
}


@pytest.mark.parametrize("case", sorted(INCONSISTENT))
def test_inconsistent_cluster_flags_name_the_flag_on_the_command_line(case):
    changes, message = INCONSISTENT[case]
    with pytest.raises(ValueError) as refused:
        check_train_config(dataclasses.replace(TrainConfig(), **changes))
    assert message in command_line_message(refused.value)


# What a library caller passes and reads: the library's own argument names, no command-line flag.
LIBRARY_CALLS = {
    "task out of range": (lambda: make_cluster_layout(task=2, worker_replicas=2, num_ps_tasks=1, master="grpc://w:1"),
                          "task=2 is out of range for worker_replicas=2; pass 0 to 1."),
    "no replicas": (lambda: make_cluster_layout(worker_replicas=0), "worker_replicas=0 must be at least 1."),
    "negative ps tasks": (lambda: make_cluster_layout(num_ps_tasks=-1),
                          "num_ps_tasks=-1 must be 0 (no parameter servers) or more."),
    "replicas without ps": (lambda: make_cluster_layout(worker_replicas=2),
                            "worker_replicas=2 needs parameter servers to share the variables; pass num_ps_tasks=1 "
                            "or more."),
    "master and hosts": (lambda: make_cluster_layout(num_ps_tasks=1, master="grpc://w:1", ps_hosts=("a:1",),
                                                     worker_hosts=("b:2",)),
                         "master=grpc://w:1 and ps_hosts/worker_hosts both say where the servers are; pass only one."),
    "ps without addresses": (lambda: make_cluster_layout(num_ps_tasks=1),
                             "num_ps_tasks=1 needs a cluster: pass ps_hosts and worker_hosts (or master of a running "
                             "worker server), or start one with scripts/launch_local_cluster.py."),
    "hosts without ps": (lambda: make_cluster_layout(ps_hosts=("a:1",), worker_hosts=("b:2",)),
                         "ps_hosts/worker_hosts need num_ps_tasks >= 1 (a cluster has parameter servers)."),
    "too few worker hosts": (lambda: make_cluster_layout(worker_replicas=2, num_ps_tasks=1, ps_hosts=("a:1",),
                                                         worker_hosts=("b:2",)),
                             "worker_hosts lists 1 address(es) but worker_replicas=2; list one host:port per task."),
    "bad host": (lambda: make_cluster_layout(num_ps_tasks=1, ps_hosts=("localhost",), worker_hosts=("b:2",)),
                 "ps_hosts entry 'localhost' is not host:port; write e.g. 127.0.0.1:2222."),
    "no clones": (lambda: CloneDevices(num_clones=0),
                  "num_clones=0 must be a positive integer; pass e.g. num_clones=2."),
    "ps without addresses to serve": (
        lambda: serve_parameter_server(ParameterServerConfig(ps_hosts=("a:1",))),
        "worker_hosts is empty; list the cluster's host:port addresses, comma-separated (or start this task with "
        "TF_CONFIG set, or with srun and num_ps_tasks under Slurm)."),
    "ps task out of range": (lambda: serve_parameter_server(ParameterServerConfig(ps_hosts=("127.0.0.1:2224",),
                                                                                  worker_hosts=TWO_HOSTS, task=1)),
                             "task=1 is out of range for 1 ps_hosts; pass 0 to 0."),
    "no ps processes": (lambda: LocalCluster(["ps"], ["worker"], num_ps=0, num_workers=2),
                        "num_ps=0 must be at least 1: the workers share variables through it."),
    "no worker processes": (lambda: LocalCluster(["ps"], ["worker"], num_ps=1, num_workers=0),
                            "num_workers=0 must be at least 1."),
    "a cluster flag among the training flags": (lambda: check_train_args(["--model_name=lenet", "--task=1"]),
                                                "--task=1 is set by the launcher from num_ps/num_workers; remove it "
                                                "from the training flags."),
}


@pytest.mark.parametrize("case", sorted(LIBRARY_CALLS))
def test_a_library_caller_reads_the_library_s_argument_names(case):
    call, message = LIBRARY_CALLS[case]
    with pytest.raises(ValueError) as refused:
        call()
    assert str(refused.value) == message


def test_a_consistent_cluster_passes_the_checks():
    check_train_config(TrainConfig(
        worker_replicas=2, num_ps_tasks=1, task=1, worker_hosts=TWO_HOSTS, ps_hosts=("127.0.0.1:2224",),
        sync_replicas=True, replicas_to_aggregate=2,
    ))
    check_train_config(TrainConfig(worker_replicas=2, num_ps_tasks=1, master="grpc://127.0.0.1:2222"))


def test_integer_list_flags_name_the_flag_on_a_bad_item():
    cli.define_flags(TrainConfig)
    try:
        cli.FLAGS(["train", "--fault_nonfinite_steps=3,x"])
        with pytest.raises(ValueError, match="--fault_nonfinite_steps=3,x"):
            cli.config_from_flags(TrainConfig)
        cli.FLAGS(["train", "--fault_nonfinite_steps=3,7"])
        assert cli.config_from_flags(TrainConfig).fault_nonfinite_steps == (3, 7)
    finally:
        cli.FLAGS.unparse_flags()


def test_the_launcher_passes_other_training_flags_on():
    check_train_args(["--model_name=lenet", "--sync_replicas"])


@pytest.mark.parametrize("script, args, expected", [
    (PS_SCRIPT, ["--ps_hosts=127.0.0.1:2224"],
     "error: --worker_hosts is empty; list the cluster's host:port addresses, comma-separated (or start this task "
     "with TF_CONFIG set, or with srun and --num_ps_tasks under Slurm)."),
    (PS_SCRIPT, ["--ps_hosts=127.0.0.1:2224", f"--worker_hosts={','.join(TWO_HOSTS)}", "--task=1"],
     "error: --task=1 is out of range for 1 --ps_hosts; pass 0 to 0."),
    (LAUNCHER, ["--num_ps=0", "--", "--model_name=lenet"],
     "error: --num_ps=0 must be at least 1: the workers share variables through it."),
])
def test_the_scripts_name_the_flags(script, args, expected):
    check_bad_input(run_script(script, *args), expected)


def test_free_loopback_ports_are_distinct():
    ports = free_loopback_ports(5)
    assert len(set(ports)) == 5 and all(0 < port < 65536 for port in ports)


def test_launcher_runs_a_cluster_streams_prefixed_logs_and_exits_with_the_chief(tmp_path):
    process = run_script(
        LAUNCHER, "--num_ps=1", "--num_workers=2", "--",
         f"--train_dir={tmp_path / 'train'}", "--dataset_name=fashion_mnist", "--model_name=lenet", "--batch_size=8",
         "--max_number_of_steps=3", "--log_every_n_steps=1", "--precision=bfloat16", "--sync_replicas",
         "--replicas_to_aggregate=2", "--num_preprocessing_threads=1", "--seed=0",
    )
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-2000:]
    lines = process.stdout.splitlines()
    assert any(re.match(r"^\[ps 0\] parameter server 0 serving on 127\.0\.0\.1:\d+$", line) for line in lines)
    for task in (0, 1):
        assert any(line.startswith(f"[worker {task}] step=3 ") for line in lines), process.stdout[-3000:]
    assert lines[-1] == "[launcher] the chief exited with status 0; all processes stopped"
    assert os.path.exists(tmp_path / "train" / "model.ckpt-3.index")


def test_launcher_refuses_cluster_flags_among_the_training_flags():
    process = run_script(LAUNCHER, "--", "--model_name=lenet", "--num_ps_tasks=3")
    assert process.returncode == 2
    assert process.stderr.strip().splitlines()[-1].startswith("error: --num_ps_tasks=3 is set by the launcher")
