"""The cluster from ``TF_CONFIG`` and from Slurm's variables, against TensorFlow's own resolvers, and every refusal.

The resolution takes the environment as a mapping; only the oracle, TensorFlow's resolvers
(which read ``os.environ``), gets the same variables through ``monkeypatch``.
"""

import dataclasses
import json

import pytest
import tensorflow as tf

from slim_mp.config_fields import ArgumentError, command_line_message
from slim_mp.distribute import PS_JOB, WORKER_JOB, cluster_from_environment
from slim_mp.distribute.cluster import ParameterServerConfig, is_loopback, open_port_warning, serve_parameter_server
from slim_mp.distribute.cluster_environment import CHIEF_JOBS, environment_cluster, read_slurm_step, read_tf_config
from slim_mp.training.train_config import TrainConfig, check_train_config

resolvers = tf.distribute.cluster_resolver


def tf_config(cluster, task_type, index, **extra) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}, **extra})


KUBEFLOW = {"ps": ["job-ps-0.ns.svc:2222"], "worker": ["job-worker-0.ns.svc:2222", "job-worker-1.ns.svc:2222"]}
VERTEX = {"chief": ["cmle-training-workerpool0-ab-0:2222"], "worker": ["cmle-training-workerpool1-ab-0:2222"],
          "ps": ["cmle-training-workerpool2-ab-0:2222", "cmle-training-workerpool2-ab-1:2222"]}
SAGEMAKER = {"master": ["algo-1:2222"], "ps": ["algo-1:2223", "algo-2:2223"], "worker": ["algo-2:2222"]}
# Each a TF_CONFIG as a cluster manager writes it.
TF_CONFIGS = {
    "kubeflow worker 1": tf_config(KUBEFLOW, "worker", 1, environment="cloud"),
    "kubeflow worker 0": tf_config(KUBEFLOW, "worker", 0),
    "kubeflow ps": tf_config(KUBEFLOW, "ps", 0),
    "vertex chief": tf_config(VERTEX, "chief", 0, job={"python_module": "trainer.task"}),
    "vertex worker": tf_config(VERTEX, "worker", 0),
    "vertex ps 1": tf_config(VERTEX, "ps", 1),
    "sagemaker master": tf_config(SAGEMAKER, "master", 0),
    "index as a string": tf_config(KUBEFLOW, "worker", "1"),
    "tasks by index": tf_config({"ps": {"0": "a:1"}, "worker": {"1": "c:3", "0": "b:2"}}, "worker", 1),
}


@pytest.mark.parametrize("case", sorted(TF_CONFIGS))
def test_tf_config_reads_as_tensorflow_s_resolver_reads_it(case, monkeypatch):
    text = TF_CONFIGS[case]
    monkeypatch.setenv("TF_CONFIG", text)
    oracle = resolvers.TFConfigClusterResolver()
    spec = oracle.cluster_spec()
    chiefs = [host for job in CHIEF_JOBS if job in spec.jobs for host in spec.job_tasks(job)]
    found = read_tf_config(text)
    assert found.ps_hosts == tuple(spec.job_tasks(PS_JOB))
    assert found.worker_hosts == tuple(chiefs + spec.job_tasks(WORKER_JOB))
    if oracle.task_type == PS_JOB:
        assert (found.job, found.task) == (PS_JOB, oracle.task_id)
    else:  # the chief is worker 0, TF_CONFIG's workers follow it
        expected = 0 if oracle.task_type in CHIEF_JOBS else len(chiefs) + oracle.task_id
        assert (found.job, found.task) == (WORKER_JOB, expected)
    if found.job == WORKER_JOB:
        assert found.worker_hosts[found.task] == spec.task_address(oracle.task_type, oracle.task_id)
    else:
        assert found.ps_hosts[found.task] == spec.task_address(oracle.task_type, oracle.task_id)


@pytest.mark.parametrize("job", ["chief", "worker"])
def test_a_one_task_cluster_without_ps_trains_in_this_process_as_tensorflow_s_master_says(job, monkeypatch):
    """Vertex AI's single-replica job sets TF_CONFIG with one chief; TensorFlow's resolver then gives master ''."""
    text = tf_config({job: ["cmle-training-workerpool0-ab-0:2222"]}, job, 0)
    monkeypatch.setenv("TF_CONFIG", text)
    assert resolvers.TFConfigClusterResolver().master() == ""
    assert cluster_from_environment(TrainConfig(), {"TF_CONFIG": text}, WORKER_JOB) == TrainConfig()


# Each TF_CONFIG refused, and the words its one error line carries.
BAD_TF_CONFIGS = {
    "not json": ('{"cluster": ', "TF_CONFIG is not valid JSON (Expecting value: line 1 column 13 (char 12))"),
    "a list": ("[1]", "TF_CONFIG is a JSON list, not an object"),
    "no cluster": ('{"task": {"type": "worker", "index": 0}}', 'TF_CONFIG has no "cluster"'),
    "no task": (json.dumps({"cluster": KUBEFLOW}), 'TF_CONFIG has no "task"'),
    "task without index": (json.dumps({"cluster": KUBEFLOW, "task": {"type": "worker"}}),
                           'TF_CONFIG "task" needs a "type" and an "index"'),
    "index not a number": (tf_config(KUBEFLOW, "worker", "one"), "TF_CONFIG \"task\" index 'one' is not an integer"),
    "index out of range": (tf_config(KUBEFLOW, "worker", 2),
                           'TF_CONFIG "task" index 2 is out of range for the 2 worker task(s)'),
    "negative index": (tf_config(KUBEFLOW, "ps", -1), 'TF_CONFIG "task" index -1 is out of range for the 1 ps'),
    "type not in the cluster": (tf_config(KUBEFLOW, "chief", 0),
                                "TF_CONFIG \"task\" type 'chief' is not a job of its cluster (ps, worker)"),
    "evaluator task": (tf_config({**KUBEFLOW, "evaluator": ["job-evaluator-0:2222"]}, "evaluator", 0),
                       "TF_CONFIG names job 'evaluator', which these scripts do not run: they run ps, worker and "
                       "one chief (or master); evaluate with scripts/eval_image_classifier.py"),
    "evaluator beside a worker task": (tf_config({**KUBEFLOW, "evaluator": ["e:1"]}, "worker", 0),
                                       "TF_CONFIG names job 'evaluator'"),
    "two chiefs": (tf_config({**KUBEFLOW, "chief": ["c0:1", "c1:1"]}, "worker", 0),
                   "TF_CONFIG has more than one chief"),
    "chief and master": (tf_config({**KUBEFLOW, "chief": ["c0:1"], "master": ["m0:1"]}, "worker", 0),
                         "TF_CONFIG has more than one chief"),
    "workers without ps": (tf_config({"worker": ["w0:1", "w1:1"]}, "worker", 0),
                           "TF_CONFIG lists 2 workers and no ps: these scripts share the variables through "
                           "parameter servers"),
    "chief and worker without ps": (tf_config({"chief": ["c:1"], "worker": ["w0:1"]}, "chief", 0),
                                    "TF_CONFIG lists 2 workers and no ps"),
    "address without port": (tf_config({"ps": ["ps0"], "worker": ["w0:1"]}, "worker", 0),
                             "TF_CONFIG job 'ps' has address 'ps0', which is not host:port"),
    "a gap in the tasks": (tf_config({"ps": ["p:1"], "worker": {"1": "w1:1"}}, "worker", 1),
                           "TF_CONFIG job 'worker' lacks task 0 (list every task, from 0)"),
    "cluster of strings": (tf_config({"ps": "p:1", "worker": ["w:1"]}, "worker", 0),
                           "TF_CONFIG \"cluster\" is not one TensorFlow reads (The tasks for job 'ps' must be a list"),
    "an empty cluster": (tf_config({}, "worker", 0), 'TF_CONFIG "cluster" names no job'),
    "another rpc layer": (tf_config(KUBEFLOW, "worker", 0, rpc_layer="grpc+verbs"),
                          "TF_CONFIG asks for rpc_layer 'grpc+verbs'; TensorFlow's servers speak grpc"),
}


@pytest.mark.parametrize("case", sorted(BAD_TF_CONFIGS))
def test_a_malformed_tf_config_is_one_error_naming_it(case):
    text, expected = BAD_TF_CONFIGS[case]
    with pytest.raises(ArgumentError) as refused:
        read_tf_config(text)
    message = command_line_message(refused.value)
    assert message.startswith(expected), message
    assert message.endswith("(docs/operations.md).") and "e.g. {\"cluster\"" in message, message


def test_flags_left_at_their_defaults_take_the_tf_config_s_cluster():
    environ = {"TF_CONFIG": TF_CONFIGS["kubeflow worker 1"]}
    config = cluster_from_environment(TrainConfig(), environ, WORKER_JOB)
    assert (config.ps_hosts, config.worker_hosts) == (tuple(KUBEFLOW["ps"]), tuple(KUBEFLOW["worker"]))
    assert (config.task, config.num_ps_tasks, config.worker_replicas) == (1, 1, 2)
    check_train_config(config)
    # The same cluster written out as flags: they agree, nothing changes.
    assert cluster_from_environment(config, environ, WORKER_JOB) == config
    ps = cluster_from_environment(ParameterServerConfig(), {"TF_CONFIG": TF_CONFIGS["vertex ps 1"]}, PS_JOB)
    assert ps == ParameterServerConfig(tuple(VERTEX["ps"]), tuple(VERTEX["chief"] + VERTEX["worker"]), 1, 2)


def test_without_tf_config_or_slurm_the_config_is_left_alone():
    config = TrainConfig(num_ps_tasks=1)
    assert cluster_from_environment(config, {}, WORKER_JOB) is config
    assert cluster_from_environment(config, {"TF_CONFIG": "  "}, WORKER_JOB) is config  # set empty, as unset
    hosts = TrainConfig(num_ps_tasks=1, ps_hosts=("p:1",), worker_hosts=("w:1",))
    assert cluster_from_environment(hosts, {"SLURM_JOB_ID": "7"}, WORKER_JOB) is hosts  # flags say it: no Slurm
    assert cluster_from_environment(TrainConfig(), {"SLURM_JOB_ID": "7"}, WORKER_JOB) == TrainConfig()


# Flags that contradict TF_CONFIG (Kubeflow's worker 1 of 2, one ps), and the error line the script prints.
CONTRADICTIONS = {
    "task": ({"task": 2}, "--task=2 contradicts TF_CONFIG, which gives 1; drop --task (it follows from TF_CONFIG) "
                          "or make the two agree."),
    "ps hosts": ({"ps_hosts": ("10.0.0.1:2222",)}, "--ps_hosts=10.0.0.1:2222 contradicts TF_CONFIG, which gives "
                                                   "job-ps-0.ns.svc:2222;"),
    "worker count": ({"worker_replicas": 3}, "--worker_replicas=3 contradicts TF_CONFIG, which gives 2;"),
    "ps count": ({"num_ps_tasks": 2}, "--num_ps_tasks=2 contradicts TF_CONFIG, which gives 1;"),
    "master": ({"master": "grpc://w0:2222"}, "--master=grpc://w0:2222 contradicts TF_CONFIG, which names the "
                                             "cluster's servers (this task starts its own); drop --master."),
}


@pytest.mark.parametrize("case", sorted(CONTRADICTIONS))
def test_a_flag_that_contradicts_tf_config_is_one_error_naming_both(case):
    changes, expected = CONTRADICTIONS[case]
    with pytest.raises(ArgumentError) as refused:
        cluster_from_environment(TrainConfig(**changes), {"TF_CONFIG": TF_CONFIGS["kubeflow worker 1"]}, WORKER_JOB)
    assert command_line_message(refused.value).startswith(expected), command_line_message(refused.value)


@pytest.mark.parametrize("config, job, case, expected", [
    (TrainConfig(), WORKER_JOB, "kubeflow ps", "TF_CONFIG makes this process ps task 0, which "
     "scripts/parameter_server.py runs, not scripts/train_image_classifier.py; start it with that script."),
    (ParameterServerConfig(), PS_JOB, "vertex chief", "TF_CONFIG makes this process worker task 0, which "
     "scripts/train_image_classifier.py runs, not scripts/parameter_server.py; start it with that script."),
])
def test_a_task_started_with_the_other_job_s_script_is_refused(config, job, case, expected):
    with pytest.raises(ArgumentError, match="^" + expected.replace("(", r"\(").replace(")", r"\)") + "$"):
        cluster_from_environment(config, {"TF_CONFIG": TF_CONFIGS[case]}, job)


def slurm_step(rank: int, nodelist: str, tasks_per_node: str, total: int) -> dict:
    """The variables srun sets in each task of a step (those TensorFlow's SlurmClusterResolver reads)."""
    return {"SLURM_JOB_ID": "4242", "SLURM_PROCID": str(rank), "SLURM_STEP_NODELIST": nodelist,
            "SLURM_STEP_TASKS_PER_NODE": tasks_per_node, "SLURM_STEP_NUM_TASKS": str(total)}


# (SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE, tasks, --num_ps_tasks)
SLURM_STEPS = {
    "one task per node": ("node[1-3]", "1(x3)", 3, 1),
    "two per node": ("gpu[01-02]", "2(x2)", 4, 1),
    "uneven, unsorted": ("b7,a[3-4]", "2,1(x2)", 4, 2),
}


@pytest.mark.parametrize("case", sorted(SLURM_STEPS))
def test_slurm_s_variables_read_as_tensorflow_s_resolver_reads_them(case, monkeypatch):
    nodelist, tasks_per_node, total, num_ps = SLURM_STEPS[case]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")  # the oracle counts GPUs; no nvidia-smi here
    for rank in range(total):
        environ = slurm_step(rank, nodelist, tasks_per_node, total)
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        oracle = resolvers.SlurmClusterResolver(jobs={PS_JOB: num_ps, WORKER_JOB: total - num_ps}, auto_set_gpu=False)
        spec = oracle.cluster_spec()
        found = read_slurm_step(environ, num_ps)
        assert found.ps_hosts == tuple(spec.job_tasks(PS_JOB))
        assert found.worker_hosts == tuple(spec.job_tasks(WORKER_JOB))
        assert (found.job, found.task) == oracle.get_task_info() == ((PS_JOB, rank) if rank < num_ps
                                                                     else (WORKER_JOB, rank - num_ps))


def test_a_slurm_step_fills_both_scripts_flags():
    environ = dict(slurm_step(2, "node[1-3]", "1(x3)", 3), SLURMD_NODENAME="node3")
    config = cluster_from_environment(TrainConfig(num_ps_tasks=1), environ, WORKER_JOB)
    assert (config.ps_hosts, config.worker_hosts) == (("node1:8888",), ("node2:8888", "node3:8888"))
    assert (config.task, config.worker_replicas) == (1, 2)
    ps = cluster_from_environment(ParameterServerConfig(num_ps_tasks=1),
                                  dict(environ, SLURM_PROCID="0", SLURMD_NODENAME="node1"), PS_JOB)
    assert (ps.ps_hosts, ps.worker_hosts, ps.task) == (config.ps_hosts, config.worker_hosts, 0)
    with pytest.raises(ArgumentError, match="^Slurm's SLURM_PROCID=0 makes this process ps task 0, which "):
        cluster_from_environment(TrainConfig(num_ps_tasks=1), dict(environ, SLURM_PROCID="0", SLURMD_NODENAME="node1"),
                                 WORKER_JOB)


BAD_SLURM = {
    "outside a step": ({"SLURM_JOB_ID": "4242"}, 1, "--num_ps_tasks=1 without --ps_hosts reads the cluster from "
                       "srun, but SLURM_PROCID is not set: this process runs in Slurm job 4242 outside a step; start "
                       "the tasks with srun (docs/operations.md shows a Slurm batch script)."),
    "no worker left": (slurm_step(0, "node[1-2]", "1(x2)", 2), 2,
                       "--num_ps_tasks=2 leaves no worker among the step's 2 task(s); lower it, or give srun more "
                       "tasks (its -n, the number of tasks)"),
    "bad node list": (slurm_step(0, "node[1-", "1", 1), 1, "--num_ps_tasks=1 without --ps_hosts reads the cluster "
                      "from srun, but its variables do not read: Invalid hostlist format \"node[1-\""),
    "node count mismatch": (slurm_step(0, "node[1-3]", "1(x2)", 2), 1, "--num_ps_tasks=1 without --ps_hosts reads "
                            "the cluster from srun, but SLURM_STEP_NODELIST names 3 node(s) and "
                            "SLURM_STEP_TASKS_PER_NODE counts tasks on 2"),
    "rank out of range": (slurm_step(5, "node[1-2]", "1(x2)", 2), 1, "SLURM_PROCID=5 is out of range for the "
                          "step's 2 task(s)"),
    # Slurm's block distribution runs rank 0 on node9; TensorFlow orders node10 first by name.
    "nodes out of name order": (dict(slurm_step(0, "node[9-10]", "1(x2)", 2), SLURMD_NODENAME="node9"), 1,
                                "Slurm runs SLURM_PROCID=0 on node9, but TensorFlow's SlurmClusterResolver places it "
                                "on node10 (it fills the nodes in the order of their names, each node's tasks by "
                                "rank); keep srun's default block distribution, and where node names sort otherwise "
                                "than Slurm counts them (node9, node10), give each task its TF_CONFIG instead"),
}


@pytest.mark.parametrize("case", sorted(BAD_SLURM))
def test_a_slurm_step_that_cannot_hold_the_cluster_is_one_error(case):
    environ, num_ps, expected = BAD_SLURM[case]
    with pytest.raises(ArgumentError) as refused:
        environment_cluster(environ, num_ps)
    message = command_line_message(refused.value)
    assert message.startswith(expected) and message.endswith("(docs/operations.md shows a Slurm batch script)."), \
        message


def test_tf_config_comes_before_slurm():
    environ = dict(slurm_step(0, "node[1-2]", "1(x2)", 2), TF_CONFIG=TF_CONFIGS["kubeflow worker 0"])
    assert environment_cluster(environ, 1).source == "TF_CONFIG"


@pytest.mark.parametrize("address, loopback", [
    ("127.0.0.1:2222", True), ("127.3.2.1:1", True), ("[::1]:2222", True), ("localhost:2222", True),
    ("10.0.0.1:2222", False), ("0.0.0.0:2222", False), ("[fd00::2]:2222", False), ("ps-0.ns.svc:2222", False),
])
def test_loopback_addresses(address, loopback):
    assert is_loopback(address) is loopback


def test_the_open_port_warning_says_what_the_port_lets_in():
    remote = open_port_warning(PS_JOB, 0, "10.0.0.1:2222")
    assert remote == (
        "ps task 0 serves 10.0.0.1:2222 and runs any graph a client sends, with no authentication: anyone who can "
        "reach that port can run code as this user; keep the cluster on a private network (docs/operations.md, "
        "\"Keep the cluster private\")."
    )
    local = open_port_warning(WORKER_JOB, 1, "127.0.0.1:2223")
    assert local.startswith("worker task 1 is addressed as 127.0.0.1:2223, but TensorFlow's gRPC server listens on "
                            "port 2223 of every network interface of this machine and runs any graph")
    assert "\n" not in remote + local


def test_a_parameter_server_config_s_count_must_match_its_hosts():
    config = dataclasses.replace(ParameterServerConfig(("p:1", "p:2"), ("w:1",)), num_ps_tasks=1)
    with pytest.raises(ArgumentError, match="ps_hosts lists 2 address"):
        serve_parameter_server(config)
