"""The cluster as cluster managers describe it: ``TF_CONFIG`` (Kubeflow's TFJob, Vertex AI, SageMaker) and Slurm.

Those managers start each task of a TensorFlow cluster with an unchanged command line and describe
the cluster in the environment: ``TF_CONFIG`` names every task's address and this task's type and
index; Slurm's ``srun`` gives this task its rank and the step's nodes. ``cluster_from_environment``
fills a script's cluster fields from them (``ps_hosts``, ``worker_hosts``, ``task``, and
``num_ps_tasks``/``worker_replicas`` where the config has them: the flag names) and refuses a flag
that contradicts them, or a description it cannot run, with one ``ArgumentError``.

What runs: the jobs ``ps`` and ``worker``, and one ``chief`` (or ``master``, its older name, which
SageMaker and AI Platform use) as the first worker: worker task 0, which initialises, restores and
saves; TF_CONFIG's worker ``i`` is then worker task ``i + 1``. A cluster of one chief or worker and
no ``ps`` (Vertex AI's single-replica job) trains in this process. ``evaluator`` and other jobs are
refused (evaluate with ``scripts/eval_image_classifier.py``), as is a cluster of several workers
without ``ps`` (that is all-reduce, which these scripts do not do).

``TF_CONFIG`` is read as TensorFlow's ``TFConfigClusterResolver`` reads it: ``tf.train.ClusterSpec``
of its ``cluster``, the task's ``type`` and ``int(index)``. That resolver reads ``os.environ`` only
and meets a malformed value with a raw exception, so the JSON is parsed here, where each fault gets
its sentence; the tests compare the result with the resolver's. Slurm goes through TensorFlow's
``SlurmClusterResolver`` itself (its host-list parsing, node order and ports, 8888 up on each node),
given this task's rank from the mapping, with ``jobs={"ps": num_ps_tasks, "worker": the rest}``:
ranks ``0 .. num_ps_tasks - 1`` are the parameter servers, the next rank the chief. It is read only
when ``num_ps_tasks`` asks for parameter servers that no flag and no ``TF_CONFIG`` address, inside a
Slurm job; GPUs are left to Slurm (``--gpus-per-task``), not to the resolver. The resolver assumes
Slurm filled the nodes in the order of their names (``node10`` before ``node9``); where Slurm's
``SLURMD_NODENAME`` shows another node, the task is refused rather than served at another's address.

Leaves alone: ``TF_CONFIG``'s ``environment``, ``session_master`` and the fields services add
(``job``, ``trial``); a config whose hosts are given when ``TF_CONFIG`` is unset (Slurm not read).
"""

import dataclasses
import json
from typing import Any, Dict, Mapping, Optional, Tuple, TypeVar

import tensorflow as tf
from tensorflow.python.distribute.cluster_resolver.slurm_cluster_resolver import (expand_hostlist,
                                                                                   expand_tasks_per_node)

from slim_mp.config_fields import ArgumentError, argument
from slim_mp.distribute.cluster import PS_JOB, WORKER_JOB, is_host_port

ConfigT = TypeVar("ConfigT")

TF_CONFIG = "TF_CONFIG"
CHIEF_JOBS = ("chief", "master")
# The script that runs each job's tasks.
SCRIPTS = {PS_JOB: "scripts/parameter_server.py", WORKER_JOB: "scripts/train_image_classifier.py"}
SLURM_JOB = "SLURM_JOB_ID"  # set in every process of a Slurm job
SLURM_STEP = ("SLURM_PROCID", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE")  # set by srun, read by TensorFlow
SLURM_NODE = "SLURMD_NODENAME"  # the node srun runs this task on: checked against where TensorFlow places it
_EXAMPLE = ('{"cluster": {"ps": ["ps0:2222"], "worker": ["w0:2222", "w1:2222"]}, '
            '"task": {"type": "worker", "index": 0}}')
_DOC = "docs/operations.md"


@dataclasses.dataclass(frozen=True)
class EnvironmentCluster:
    """This task and the cluster's addresses as the environment gives them; ``source`` names the giver."""

    source: str
    job: str
    task: int
    ps_hosts: Tuple[str, ...]
    worker_hosts: Tuple[str, ...]

    def fields(self) -> Dict[str, Any]:
        """The cluster fields (flag names) this description sets; no hosts for a single process."""
        return {"ps_hosts": self.ps_hosts, "worker_hosts": self.worker_hosts, "task": self.task,
                "num_ps_tasks": len(self.ps_hosts), "worker_replicas": max(len(self.worker_hosts), 1)}


def _tf_config_error(problem: str) -> ArgumentError:
    return ArgumentError(f"TF_CONFIG {problem}; set it as the cluster manager does, e.g. {_EXAMPLE} ({_DOC}).")


def _cluster_jobs(cluster: Any) -> Dict[str, Tuple[str, ...]]:
    """Every job's addresses, as ``tf.train.ClusterSpec`` reads ``cluster``, each a dense list of ``host:port``."""
    try:
        spec = tf.train.ClusterSpec(cluster)
        jobs = {job: tuple(spec.job_tasks(job)) for job in spec.jobs}
    except (TypeError, ValueError) as error:
        raise _tf_config_error(f'"cluster" is not one TensorFlow reads ({error})') from error
    if not jobs:
        raise _tf_config_error('"cluster" names no job')
    for job, hosts in jobs.items():
        if None in hosts:
            raise _tf_config_error(f'job {job!r} lacks task {hosts.index(None)} (list every task, from 0)')
        bad = [host for host in hosts if not is_host_port(host)]
        if bad:
            raise _tf_config_error(f"job {job!r} has address {bad[0]!r}, which is not host:port")
    unknown = sorted(set(jobs) - {PS_JOB, WORKER_JOB, *CHIEF_JOBS})
    if unknown:
        raise _tf_config_error(
            f"names job {unknown[0]!r}, which these scripts do not run: they run ps, worker and one chief (or "
            "master); evaluate with scripts/eval_image_classifier.py instead of an evaluator task"
        )
    chiefs = [job for job in CHIEF_JOBS if job in jobs]
    if len(chiefs) > 1 or (chiefs and len(jobs[chiefs[0]]) != 1):
        raise _tf_config_error("has more than one chief: list one task under chief (or master), not both")
    return jobs


def _task(task: Any, jobs: Dict[str, Tuple[str, ...]]) -> Tuple[str, int]:
    """The task's type and index, read as ``TFConfigClusterResolver`` reads them (``str``, ``int``), checked."""
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise _tf_config_error('"task" needs a "type" and an "index"')
    kind = str(task["type"])
    try:
        index = int(task["index"])
    except (TypeError, ValueError):
        raise _tf_config_error(f'"task" index {task["index"]!r} is not an integer') from None
    if kind not in jobs:
        raise _tf_config_error(f'"task" type {kind!r} is not a job of its cluster ({", ".join(sorted(jobs))})')
    if not 0 <= index < len(jobs[kind]):
        raise _tf_config_error(f'"task" index {index} is out of range for the {len(jobs[kind])} {kind} task(s)')
    return kind, index


def read_tf_config(text: str) -> EnvironmentCluster:
    """The cluster a ``TF_CONFIG`` value describes, as this repository runs it (chief first among the workers).

    Raises:
      ArgumentError: naming ``TF_CONFIG`` and what is wrong with it.
    """
    try:
        config = json.loads(text)
    except ValueError as error:
        raise _tf_config_error(f"is not valid JSON ({error})") from None
    if not isinstance(config, dict):
        raise _tf_config_error(f"is a JSON {type(config).__name__}, not an object")
    for key in ("cluster", "task"):
        if key not in config:
            raise _tf_config_error(f'has no "{key}"')
    if config.get("rpc_layer", "grpc") != "grpc":
        raise _tf_config_error(f"asks for rpc_layer {config['rpc_layer']!r}; TensorFlow's servers speak grpc")
    jobs = _cluster_jobs(config["cluster"])
    kind, index = _task(config["task"], jobs)
    chiefs = tuple(host for job in CHIEF_JOBS for host in jobs.get(job, ()))
    ps_hosts, worker_hosts = jobs.get(PS_JOB, ()), chiefs + jobs.get(WORKER_JOB, ())
    if kind == PS_JOB:
        job, task = PS_JOB, index
    else:
        job, task = WORKER_JOB, 0 if kind in CHIEF_JOBS else len(chiefs) + index
    if not ps_hosts and len(worker_hosts) > 1:
        raise _tf_config_error(
            f"lists {len(worker_hosts)} workers and no ps: these scripts share the variables through parameter "
            "servers; add ps tasks (PS replicas)"
        )
    if not ps_hosts:  # one task alone: this process trains by itself, as TensorFlow's resolver says (master "")
        worker_hosts = ()
    return EnvironmentCluster(TF_CONFIG, job, task, ps_hosts, worker_hosts)


class _SlurmStepResolver(tf.distribute.cluster_resolver.SlurmClusterResolver):
    """TensorFlow's Slurm resolver, told this task's rank instead of reading ``os.environ``."""

    def __init__(self, rank: int, **options: Any) -> None:
        self._given_rank = rank
        super().__init__(**options)

    def _resolve_own_rank(self) -> int:
        return self._given_rank


def _slurm_error(problem: str) -> ArgumentError:
    return ArgumentError(f"{problem} ({_DOC} shows a Slurm batch script).")


def read_slurm_step(environ: Mapping[str, str], num_ps_tasks: int) -> EnvironmentCluster:
    """The cluster of the Slurm step in ``environ``: its first ``num_ps_tasks`` ranks are parameter servers.

    Raises:
      ArgumentError: naming the Slurm variable or ``num_ps_tasks`` at fault.
    """
    asked = f"{argument('num_ps_tasks')}={num_ps_tasks} without {argument('ps_hosts')} reads the cluster from srun"
    missing = [name for name in SLURM_STEP if not environ.get(name)]
    if missing:
        raise _slurm_error(f"{asked}, but {missing[0]} is not set: this process runs in Slurm job "
                           f"{environ.get(SLURM_JOB, '?')} outside a step; start the tasks with srun")
    try:
        rank = int(environ["SLURM_PROCID"])
        hosts = expand_hostlist(environ["SLURM_STEP_NODELIST"])
        tasks_per_node = expand_tasks_per_node(environ["SLURM_STEP_TASKS_PER_NODE"])
    except ValueError as error:
        raise _slurm_error(f"{asked}, but its variables do not read: {error}") from None
    if len(hosts) != len(tasks_per_node):
        raise _slurm_error(f"{asked}, but SLURM_STEP_NODELIST names {len(hosts)} node(s) and "
                           f"SLURM_STEP_TASKS_PER_NODE counts tasks on {len(tasks_per_node)}")
    total = sum(tasks_per_node)
    if num_ps_tasks >= total:
        raise _slurm_error(f"{argument('num_ps_tasks')}={num_ps_tasks} leaves no worker among the step's {total} "
                           f"task(s); lower it, or give srun more tasks (its -n, the number of tasks)")
    if not 0 <= rank < total:
        raise _slurm_error(f"SLURM_PROCID={rank} is out of range for the step's {total} task(s)")
    resolver = _SlurmStepResolver(
        rank, jobs={PS_JOB: num_ps_tasks, WORKER_JOB: total - num_ps_tasks},
        tasks_per_node=dict(zip(hosts, tasks_per_node)),
        # Its GPU split is off (auto_set_gpu); these two only keep its arithmetic from dropping tasks.
        gpus_per_node=max(tasks_per_node), gpus_per_task=1, auto_set_gpu=False,
    )
    spec = resolver.cluster_spec()
    placed = spec.task_address(resolver.task_type, resolver.task_id).rpartition(":")[0]
    node = environ.get(SLURM_NODE)
    if node and node != placed:
        raise _slurm_error(
            f"Slurm runs SLURM_PROCID={rank} on {node}, but TensorFlow's SlurmClusterResolver places it on {placed} "
            "(it fills the nodes in the order of their names, each node's tasks by rank); keep srun's default block "
            "distribution, and where node names sort otherwise than Slurm counts them (node9, node10), give each "
            "task its TF_CONFIG instead"
        )
    return EnvironmentCluster(f"Slurm's SLURM_PROCID={rank}", resolver.task_type, resolver.task_id,
                              tuple(spec.job_tasks(PS_JOB)), tuple(spec.job_tasks(WORKER_JOB)))


def environment_cluster(environ: Mapping[str, str], num_ps_tasks: int = 0,
                        hosts_given: bool = False) -> Optional[EnvironmentCluster]:
    """The cluster ``environ`` describes: ``TF_CONFIG`` if set (not empty), else the Slurm step when
    ``num_ps_tasks`` asks for parameter servers that ``hosts_given`` does not address; else None."""
    if environ.get(TF_CONFIG, "").strip():
        return read_tf_config(environ[TF_CONFIG])
    if num_ps_tasks > 0 and not hosts_given and SLURM_JOB in environ:
        return read_slurm_step(environ, num_ps_tasks)
    return None


def _shown(value: Any) -> str:
    return ",".join(value) if isinstance(value, tuple) else str(value)


def cluster_from_environment(config: ConfigT, environ: Mapping[str, str], job: str) -> ConfigT:
    """``config`` (a dataclass with the cluster fields) with the cluster ``environ`` describes, for a ``job`` task.

    A cluster field left at its default takes the environment's value; one set otherwise must agree.
    ``config`` comes back unchanged when the environment describes no cluster (``environment_cluster``).

    Raises:
      ArgumentError: naming ``TF_CONFIG`` or the Slurm variable at fault, the field that contradicts it,
        or the script that runs this task when ``job`` is not its job.
    """
    master = getattr(config, "master", "")
    found = environment_cluster(environ, config.num_ps_tasks, bool(config.ps_hosts or config.worker_hosts or master))
    if found is None:
        return config
    if found.job != job:
        raise ArgumentError(f"{found.source} makes this process {found.job} task {found.task}, which "
                            f"{SCRIPTS[found.job]} runs, not {SCRIPTS[job]}; start it with that script.")
    if master:
        raise ArgumentError(f"{argument('master')}={master} contradicts {found.source}, which names the cluster's "
                            f"servers (this task starts its own); drop {argument('master')}.")
    defaults = {field.name: field.default for field in dataclasses.fields(config)}
    values = {name: value for name, value in found.fields().items() if name in defaults}
    for name, value in values.items():
        given = getattr(config, name)
        if given not in (defaults[name], value):
            raise ArgumentError(
                f"{argument(name)}={_shown(given)} contradicts {found.source}, which gives {_shown(value)}; drop "
                f"{argument(name)} (it follows from {found.source}) or make the two agree."
            )
    return dataclasses.replace(config, **values)
