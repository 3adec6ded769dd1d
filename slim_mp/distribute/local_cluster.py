"""A TensorFlow cluster on this machine: parameter-server and worker processes on loopback ports.

``LocalCluster`` picks free ports on 127.0.0.1, starts one process per task with the cluster
flags (``--ps_hosts``, ``--worker_hosts``, ``--task``, ``--num_ps_tasks``, ``--worker_replicas``)
added, or with ``tf_config`` the ``TF_CONFIG`` a cluster manager would set instead, streams every
line they print with a ``[ps 0]`` / ``[worker 1]`` prefix, and stops them all.
``scripts/launch_local_cluster.py`` is its command line; tests use it to kill and restart workers.
A ``TF_CONFIG`` of the launcher's own environment (a cluster manager's) does not reach the tasks.

Example::

    cluster = LocalCluster(ps_command, worker_command, num_ps=1, num_workers=2)
    cluster.start()
    exit_code = cluster.wait_for_chief(timeout=600)   # stops the others when the chief is done
"""

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from slim_mp.config_fields import ArgumentError, argument, as_flag
from slim_mp.distribute.cluster_environment import TF_CONFIG

LOOPBACK = "127.0.0.1"
# The cluster flags the launcher sets itself; passing them as training flags would contradict it.
CLUSTER_FLAGS = ("ps_hosts", "worker_hosts", "task", "num_ps_tasks", "worker_replicas", "master")
STOP_GRACE_SECS = 10.0
CHIEF_SAVE_GRACE_SECS = 60.0
POLL_SECS = 0.2


def free_loopback_ports(count: int) -> List[int]:
    """Return ``count`` distinct TCP ports that are free on 127.0.0.1 right now."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def check_train_args(train_args: Sequence[str]) -> None:
    """Raise ArgumentError if ``train_args`` sets a flag the launcher owns (it would contradict the cluster)."""
    for arg in train_args:
        name = arg.lstrip("-").split("=", 1)[0]
        if arg.startswith("-") and name in CLUSTER_FLAGS:
            raise ArgumentError(
                f"{arg} is set by the launcher from {argument('num_ps')}/{argument('num_workers')}; remove it from "
                "the training flags."
            )


@dataclasses.dataclass
class _Task:
    """One running task: its process and the thread copying its output."""

    process: subprocess.Popen
    reader: threading.Thread


class LocalCluster:
    """Parameter servers and workers as child processes of this one, on loopback ports.

    ``ps_command`` and ``worker_command`` are the command lines without cluster flags (e.g.
    ``[python, scripts/train_image_classifier.py, --model_name=lenet, ...]``). ``sink`` receives
    every prefixed output line (default: print to stdout). ``worker_args`` adds flags for single
    workers (e.g. a fault injected on worker 1 only). ``tf_config`` describes the cluster to each
    task with ``TF_CONFIG`` (as Kubeflow's TFJob does) instead of flags. ``ps_address`` and
    ``worker_address`` are the hosts the tasks are addressed by: loopback unless another interface
    of this machine carries them (a shaped link's two ends); the ports are free ones of loopback.
    """

    def __init__(self, ps_command: Sequence[str], worker_command: Sequence[str], num_ps: int, num_workers: int,
                 sink: Callable[[str], None] = print, env: Optional[Dict[str, str]] = None,
                 worker_args: Optional[Mapping[int, Sequence[str]]] = None, tf_config: bool = False,
                 ps_address: str = LOOPBACK, worker_address: str = LOOPBACK) -> None:
        if num_ps < 1:
            raise ArgumentError(f"{argument('num_ps')}={num_ps} must be at least 1: the workers share variables "
                                "through it.")
        if num_workers < 1:
            raise ArgumentError(f"{argument('num_workers')}={num_workers} must be at least 1.")
        ports = free_loopback_ports(num_ps + num_workers)
        self.ps_hosts = [f"{ps_address}:{port}" for port in ports[:num_ps]]
        self.worker_hosts = [f"{worker_address}:{port}" for port in ports[num_ps:]]
        self._ps_command = list(ps_command)
        self._worker_command = list(worker_command)
        self._sink = sink
        self._sink_lock = threading.Lock()
        self._env = dict(os.environ if env is None else env, PYTHONUNBUFFERED="1")
        self._env.pop(TF_CONFIG, None)
        self._tasks: Dict[Tuple[str, int], _Task] = {}
        self._killed: Set[int] = set()
        self._worker_args = {task: list(args) for task, args in (worker_args or {}).items()}
        self._tf_config = tf_config

    def _cluster_flags(self, job: str, task: int) -> List[str]:
        if self._tf_config:
            return []
        flags = [f"{as_flag('ps_hosts')}={','.join(self.ps_hosts)}",
                 f"{as_flag('worker_hosts')}={','.join(self.worker_hosts)}", f"{as_flag('task')}={task}"]
        if job == "worker":
            flags += [f"{as_flag('num_ps_tasks')}={len(self.ps_hosts)}",
                      f"{as_flag('worker_replicas')}={len(self.worker_hosts)}"]
        return flags

    def _task_env(self, job: str, task: int) -> Dict[str, str]:
        if not self._tf_config:
            return self._env
        cluster = {"cluster": {"ps": self.ps_hosts, "worker": self.worker_hosts}, "task": {"type": job, "index": task}}
        return dict(self._env, **{TF_CONFIG: json.dumps(cluster)})

    def _emit(self, line: str) -> None:
        with self._sink_lock:
            self._sink(line)

    def _start(self, job: str, task: int, command: List[str]) -> None:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=self._task_env(job, task), text=True, bufsize=1,
            start_new_session=True,  # Ctrl-C reaches the launcher only; it interrupts the chief once
        )
        prefix = f"[{job} {task}] "

        def copy_output() -> None:
            for line in process.stdout:
                self._emit(prefix + line.rstrip("\n"))

        reader = threading.Thread(target=copy_output, name=f"{job}-{task}-output", daemon=True)
        reader.start()
        self._tasks[(job, task)] = _Task(process, reader)

    def start(self) -> None:
        """Start every parameter server, then every worker (task 0, the chief, first)."""
        for task in range(len(self.ps_hosts)):
            self.start_ps(task)
        for task in range(len(self.worker_hosts)):
            self.start_worker(task)

    def start_ps(self, task: int) -> None:
        """Start (or restart, after ``kill_ps``) parameter server ``task`` on its address."""
        self._start("ps", task, self._ps_command + self._cluster_flags("ps", task))

    def start_worker(self, task: int) -> None:
        """Start (or restart, after ``kill_worker``) worker ``task``."""
        flags = self._cluster_flags("worker", task) + self._worker_args.get(task, [])
        self._killed.discard(task)
        self._start("worker", task, self._worker_command + flags)

    def kill_worker(self, task: int) -> None:
        """Kill worker ``task`` at once (SIGKILL), as a crash would, and wait until it is gone."""
        self._killed.add(task)
        self._kill("worker", task)

    def kill_ps(self, task: int) -> None:
        """Kill parameter server ``task`` at once (SIGKILL) and wait until it is gone."""
        self._kill("ps", task)

    def _kill(self, job: str, task: int) -> None:
        running = self._tasks[(job, task)]
        running.process.kill()
        running.process.wait()
        running.reader.join(timeout=STOP_GRACE_SECS)

    def exit_code(self, job: str, task: int) -> Optional[int]:
        """The exit status of a task, or None while it runs."""
        return self._tasks[(job, task)].process.poll()

    def wait_for_chief(self, timeout: Optional[float] = None) -> int:
        """Wait until the chief exits (or another worker fails), then stop everything; return the exit status.

        A non-chief worker that fails stops the run with its status: in synchronous training the
        others would wait for it for ever. ``timeout`` (seconds) bounds the wait; on expiry
        everything is stopped and ``TimeoutError`` raised. Ctrl-C interrupts the chief (which saves
        a checkpoint), waits for it, stops the rest and re-raises ``KeyboardInterrupt``; an
        interrupt carrying a ``signum`` (the launcher's SIGTERM) forwards that signal instead.
        """
        try:
            return self._wait(timeout)
        except KeyboardInterrupt as interrupt:
            self.interrupt_chief(getattr(interrupt, "signum", signal.SIGINT))
            raise
        finally:
            self.stop()

    def _wait(self, timeout: Optional[float]) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            chief = self.exit_code("worker", 0)
            if chief is not None:
                return chief
            for (job, task), running in self._tasks.items():
                code = running.process.poll()
                if job == "worker" and code not in (None, 0) and task not in self._killed:
                    self._emit(f"[launcher] worker {task} failed with status {code}; stopping the cluster")
                    return code
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"the chief did not finish within {timeout:g} s; the cluster was stopped.")
            time.sleep(POLL_SECS)

    def interrupt_chief(self, signum: int = signal.SIGINT) -> None:
        """Send the chief one ``signum`` (it saves a checkpoint and exits) and wait for it, up to a grace period.

        The chief goes first: the other workers of a synchronous job must keep stepping until its save is done.
        """
        chief = self._tasks[("worker", 0)].process
        if chief.poll() is None:
            chief.send_signal(signum)
            try:
                chief.wait(timeout=CHIEF_SAVE_GRACE_SECS)
            except subprocess.TimeoutExpired:
                self._emit(f"[launcher] the chief did not stop within {CHIEF_SAVE_GRACE_SECS:g} s of "
                           f"{signal.Signals(signum).name}")
            else:
                self._emit(f"[launcher] worker 0 (the chief) got {signal.Signals(signum).name} and exited with "
                           f"status {chief.returncode} (it saves the current step first)")

    def stop(self) -> None:
        """Stop every task still running: SIGTERM, then SIGKILL after a grace period; say what each did."""
        running = {key: task for key, task in self._tasks.items() if task.process.poll() is None}
        for task in running.values():
            task.process.terminate()
        deadline = time.monotonic() + STOP_GRACE_SECS
        for (job, index), task in running.items():
            try:
                task.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
                how = f"exited with status {task.process.returncode}"
            except subprocess.TimeoutExpired:
                task.process.kill()
                task.process.wait()
                how = f"was killed after {STOP_GRACE_SECS:g} s (blocked, e.g. waiting for a step of a stopped worker)"
            self._emit(f"[launcher] {job} {index} stopped: {how}")
        for task in self._tasks.values():
            task.reader.join(timeout=STOP_GRACE_SECS)


def python_command(script: str, args: Sequence[str] = ()) -> List[str]:
    """The command line running ``script`` with this Python interpreter."""
    return [sys.executable, script, *args]
