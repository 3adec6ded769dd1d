"""Clone and cluster flags: contradictions are refused before any work, naming the flag; the launcher CLI."""

import dataclasses
import os
import re

import pytest

from script_runs import REPO_ROOT, run_script
from slim_mp.training import cli
from slim_mp.distribute.cluster import ParameterServerConfig, serve_parameter_server
from slim_mp.distribute.local_cluster import check_train_args, free_loopback_ports
from slim_mp.training.train_config import TrainConfig, check_train_config

LAUNCHER = os.path.join(REPO_ROOT, "scripts", "launch_local_cluster.py")
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
def test_inconsistent_cluster_flags_name_the_flag(case):
    changes, message = INCONSISTENT[case]
    with pytest.raises(ValueError, match=re.escape(message)):
        check_train_config(dataclasses.replace(TrainConfig(), **changes))


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


def test_the_launcher_owns_the_cluster_flags():
    check_train_args(["--model_name=lenet", "--sync_replicas"])
    with pytest.raises(ValueError, match="--task=1 is set by the launcher"):
        check_train_args(["--model_name=lenet", "--task=1"])


def test_parameter_server_needs_addresses():
    with pytest.raises(ValueError, match="--worker_hosts is empty"):
        serve_parameter_server(ParameterServerConfig(ps_hosts=("127.0.0.1:2224",)))
    with pytest.raises(ValueError, match="--task=1 is out of range"):
        serve_parameter_server(ParameterServerConfig(ps_hosts=("127.0.0.1:2224",), worker_hosts=TWO_HOSTS, task=1))


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
