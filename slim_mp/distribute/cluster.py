"""Where a training process sits in a TensorFlow cluster: its job and task, devices, and session target.

TF-Slim's cluster options describe it (``num_ps_tasks``, ``worker_replicas``, ``task``, ``master``,
the training script's flags of the same names); ``ps_hosts``/``worker_hosts`` add the addresses, so
a worker can start its own server instead of needing one started elsewhere (``cluster_environment``
fills them from ``TF_CONFIG`` or Slurm). Variables go to the parameter servers (``ps`` job),
everything else to this worker (``worker`` job, task ``task``); task 0 is the chief. Errors are
``ArgumentError``s naming these arguments (flags on a command line).

A server started here (a worker's, a parameter server's) says in one warning line that it runs
whatever graph reaches its port: TensorFlow's gRPC server has no authentication, and it listens on
every network interface of the machine, whatever host its address names.
"""

import dataclasses
import ipaddress
import re
import socket
import time
from typing import Callable, Optional, Sequence, Tuple

import tensorflow as tf
from absl import logging

from slim_mp.config_fields import ArgumentError, argument, option

tf1 = tf.compat.v1

PS_JOB = "ps"
WORKER_JOB = "worker"
# What a session reports when a task of the cluster stops answering (Unavailable) or was restarted,
# losing the session's graphs (Aborted), or when a call to it times out.
LOST_TASK_ERRORS = (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.DeadlineExceededError)
_TASK_NAME = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")
# Where docs/operations.md says how to keep a cluster's ports away from untrusted networks.
PRIVATE_CLUSTER_DOC = 'docs/operations.md, "Keep the cluster private"'
# How often a worker knocks on a parameter server that does not answer yet (seconds).
PS_POLL_SECS = 1.0


@dataclasses.dataclass(frozen=True)
class ClusterLayout:
    """This process's place in the cluster (a single process when ``num_ps_tasks`` is 0)."""

    task: int = 0
    worker_replicas: int = 1
    num_ps_tasks: int = 0
    ps_hosts: Tuple[str, ...] = ()
    worker_hosts: Tuple[str, ...] = ()
    master: str = ""

    @property
    def distributed(self) -> bool:
        """True when variables live on parameter servers."""
        return self.num_ps_tasks > 0

    @property
    def is_chief(self) -> bool:
        """The chief (task 0) initialises or restores the variables and writes checkpoints and summaries."""
        return self.task == 0

    @property
    def worker_device(self) -> str:
        """This worker's device prefix ("" for a single process)."""
        return f"/job:{WORKER_JOB}/task:{self.task}" if self.distributed else ""

    def device_setter(self) -> Optional[object]:
        """A ``tf.device`` function putting variables on the parameter servers, or None for a single process."""
        if not self.distributed:
            return None
        return tf1.train.replica_device_setter(
            ps_tasks=self.num_ps_tasks, ps_device=f"/job:{PS_JOB}", worker_device=self.worker_device
        )

    def session_config(self) -> Optional[tf1.ConfigProto]:
        """Session options: a worker talks only to the parameter servers and itself, never waits for other workers.

        Grappler's rewrites stay as in a single process, the remapper's fusions included: the one
        a worker would refuse (a bfloat16 ``_FusedConv2D`` under oneDNN) ``form_worker_fusions``
        makes in the graph beforehand (``slim_mp.distribute.worker_fusions``).
        """
        if not self.distributed:
            return None
        return tf1.ConfigProto(device_filters=[f"/job:{PS_JOB}", self.worker_device])

    def cluster_spec(self) -> tf.train.ClusterSpec:
        """The ``ClusterSpec`` of ``ps_hosts`` and ``worker_hosts``."""
        return tf.train.ClusterSpec({PS_JOB: list(self.ps_hosts), WORKER_JOB: list(self.worker_hosts)})


def lost_task(error: tf.errors.OpError, layout: ClusterLayout) -> str:
    """Name the task that ``error`` (one of ``LOST_TASK_ERRORS``) came from: ``ps task 0 (127.0.0.1:2222)``.

    The message of an error relayed by this worker names this worker too; the other task is the lost one.
    """
    named = [(match.group(1), int(match.group(2))) for match in _TASK_NAME.finditer(error.message)]
    others = [(job, task) for job, task in named if (job, task) != (WORKER_JOB, layout.task)]
    if not others:
        return f"a task of the cluster ({type(error).__name__})"
    job, task = others[0]
    hosts = {PS_JOB: layout.ps_hosts, WORKER_JOB: layout.worker_hosts}.get(job, ())
    address = f" ({hosts[task]})" if task < len(hosts) else ""
    return f"{job} task {task}{address}"


def _check_task(task: int, count: int, of: str) -> None:
    """Raise ArgumentError unless ``task`` indexes one of ``count`` tasks (``of`` says what counts them)."""
    if not 0 <= task < count:
        raise ArgumentError(f"{argument('task')}={task} is out of range for {of}; pass 0 to {count - 1}.")


def is_host_port(address: str) -> bool:
    """True for ``host:port`` with a port from 1 to 65535 (``10.0.0.1:2222``, ``[::1]:2222``, ``ps-0.svc:2222``)."""
    name, _, port = address.rpartition(":")
    return bool(name) and port.isdigit() and 0 < int(port) < 65536


def is_loopback(address: str) -> bool:
    """True when the host of ``host:port`` is a loopback address (127.0.0.0/8, ::1) or ``localhost``."""
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it resolves to whatever the network says
        return False


def _check_hosts(hosts_argument: str, hosts: Sequence[str], expected: int, count_argument: str) -> None:
    """Raise ArgumentError unless ``hosts`` holds ``expected`` (``count_argument``'s value) ``host:port`` addresses."""
    if len(hosts) != expected:
        raise ArgumentError(
            f"{argument(hosts_argument)} lists {len(hosts)} address(es) but {argument(count_argument)}={expected}; "
            "list one host:port per task."
        )
    for host in hosts:
        if not is_host_port(host):
            raise ArgumentError(
                f"{argument(hosts_argument)} entry {host!r} is not host:port; write e.g. 127.0.0.1:2222.")


def make_cluster_layout(
    task: int = 0,
    worker_replicas: int = 1,
    num_ps_tasks: int = 0,
    ps_hosts: Sequence[str] = (),
    worker_hosts: Sequence[str] = (),
    master: str = "",
) -> ClusterLayout:
    """Check the cluster arguments against each other and return the layout.

    Raises:
      ArgumentError: naming the argument at fault (the training script's flag of the same name).
    """
    if worker_replicas < 1:
        raise ArgumentError(f"{argument('worker_replicas')}={worker_replicas} must be at least 1.")
    if num_ps_tasks < 0:
        raise ArgumentError(f"{argument('num_ps_tasks')}={num_ps_tasks} must be 0 (no parameter servers) or more.")
    _check_task(task, worker_replicas, f"{argument('worker_replicas')}={worker_replicas}")
    if worker_replicas > 1 and num_ps_tasks == 0:
        raise ArgumentError(
            f"{argument('worker_replicas')}={worker_replicas} needs parameter servers to share the variables; "
            f"pass {argument('num_ps_tasks')}=1 or more."
        )
    addressed = bool(ps_hosts or worker_hosts)
    hosts = f"{argument('ps_hosts')}/{argument('worker_hosts')}"
    if addressed and master:
        raise ArgumentError(
            f"{argument('master')}={master} and {hosts} both say where the servers are; pass only one."
        )
    if num_ps_tasks > 0 and not (addressed or master):
        raise ArgumentError(
            f"{argument('num_ps_tasks')}={num_ps_tasks} needs a cluster: pass {argument('ps_hosts')} and "
            f"{argument('worker_hosts')} (or {argument('master')} of a running worker server), or start one with "
            "scripts/launch_local_cluster.py."
        )
    if addressed:
        if num_ps_tasks == 0:
            raise ArgumentError(
                f"{hosts} need {argument('num_ps_tasks')} >= 1 (a cluster has parameter servers)."
            )
        _check_hosts("ps_hosts", ps_hosts, num_ps_tasks, "num_ps_tasks")
        _check_hosts("worker_hosts", worker_hosts, worker_replicas, "worker_replicas")
    return ClusterLayout(task, worker_replicas, num_ps_tasks, tuple(ps_hosts), tuple(worker_hosts), master)


def session_target(layout: ClusterLayout) -> str:
    """Return the target this process's sessions connect to, starting this worker's server when hosts are given.

    ``master`` is used as given; with ``worker_hosts`` a server for task ``task`` starts in
    this process (it serves until the process exits) and waits for the parameter servers
    (``wait_for_parameter_servers``); otherwise the session is in-process ("").
    """
    if not layout.worker_hosts:
        return layout.master
    server = _start_server(layout.cluster_spec(), WORKER_JOB, layout.task)
    wait_for_parameter_servers(layout.ps_hosts)
    return server.target


def wait_for_parameter_servers(ps_hosts: Sequence[str], poll_secs: float = PS_POLL_SECS) -> None:
    """Return once every parameter server of ``ps_hosts`` accepts a connection, saying once which one it waits for.

    A worker started before its parameter servers (a cluster manager starts them in any order)
    waits here, in Python, where Ctrl-C and SIGTERM stop it at once; TensorFlow's own wait, in
    session creation, lets no signal through until the session exists. A name that does not
    resolve yet (a Kubernetes service created with its pod) is waited for too.
    """
    for task, address in enumerate(ps_hosts):
        announced = False
        while True:
            error = connection_refusal(address, poll_secs)
            if error is None:
                break
            if not announced:
                logging.warning("waiting for ps task %d (%s) to answer (%s); training starts when it does",
                                task, address, error.strerror or error)
                announced = True
            time.sleep(poll_secs)


def connection_refusal(address: str, timeout: float) -> Optional[OSError]:
    """None when ``address`` (``host:port``, an IPv6 host in brackets) accepts a connection within ``timeout``
    seconds; else why not."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except OSError as error:
        return error


def open_port_warning(job: str, task: int, address: str) -> str:
    """The one line a started server logs: its port runs any graph a client sends, and who can reach it.

    TensorFlow's gRPC server has no authentication and runs whatever graph a client sends (code
    execution as this user); it listens on ``address``'s port on every interface of the machine,
    even when ``address`` is a loopback one.
    """
    port = address.rpartition(":")[2]
    if is_loopback(address):
        reach = (f"is addressed as {address}, but TensorFlow's gRPC server listens on port {port} of every network "
                 "interface of this machine")
        who = "anyone who can reach this machine (unless a firewall closes the port)"
    else:
        reach = f"serves {address}"
        who = "anyone who can reach that port"
    return (f"{job} task {task} {reach} and runs any graph a client sends, with no authentication: {who} can run "
            f"code as this user; keep the cluster on a private network ({PRIVATE_CLUSTER_DOC}).")


def _start_server(cluster: tf.train.ClusterSpec, job: str, task: int) -> tf.distribute.Server:
    """Start the server of ``job`` task ``task`` and log ``open_port_warning`` once."""
    server = tf.distribute.Server(cluster, job_name=job, task_index=task, start=True)
    logging.warning("%s", open_port_warning(job, task, cluster.task_address(job, task)))
    return server


@dataclasses.dataclass(frozen=True)
class ParameterServerConfig:
    """The options of ``scripts/parameter_server.py`` (field names are the flag names)."""

    ps_hosts: Tuple[str, ...] = option(
        (), "Comma-separated host:port of the parameter servers (this worker then starts its own server)."
    )
    worker_hosts: Tuple[str, ...] = option((), "Comma-separated host:port of the workers, task 0 first.")
    task: int = option(0, f"Index of this parameter server in {argument('ps_hosts')}.")
    num_ps_tasks: int = option(
        0, f"Number of parameter servers; under Slurm (srun, no {argument('ps_hosts')}) the first this many tasks of "
        f"the step are the parameter servers. Elsewhere {argument('ps_hosts')} counts them."
    )


def serve_parameter_server(config: ParameterServerConfig, print_line: Callable[[str], None] = print) -> None:
    """Run parameter server ``config.task`` of the cluster until the process is stopped (it never returns).

    Raises:
      ArgumentError: naming the field of ``config`` at fault (the script's flag of the same name).
    """
    ps_hosts, worker_hosts, task = config.ps_hosts, config.worker_hosts, config.task
    for field, hosts in (("ps_hosts", ps_hosts), ("worker_hosts", worker_hosts)):
        if not hosts:
            raise ArgumentError(
                f"{argument(field)} is empty; list the cluster's host:port addresses, comma-separated (or start "
                f"this task with TF_CONFIG set, or with srun and {argument('num_ps_tasks')} under Slurm)."
            )
    layout = make_cluster_layout(
        task=0, worker_replicas=len(worker_hosts), num_ps_tasks=config.num_ps_tasks or len(ps_hosts),
        ps_hosts=ps_hosts, worker_hosts=worker_hosts,
    )
    _check_task(task, len(ps_hosts), f"{len(ps_hosts)} {argument('ps_hosts')}")
    server = _start_server(layout.cluster_spec(), PS_JOB, task)
    print_line(f"parameter server {task} serving on {ps_hosts[task]}")
    server.join()
