"""Run the training and evaluation scripts as subprocesses, the way a user does, and read what they leave."""

import atexit
import contextlib
import dataclasses
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import tensorflow as tf

from session_builds import made_once
from slim_mp.distribute.local_cluster import python_command

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN_SCRIPT = os.path.join(REPO_ROOT, "scripts", "train_image_classifier.py")
EVAL_SCRIPT = os.path.join(REPO_ROOT, "scripts", "eval_image_classifier.py")
TIMEOUT_S = 300

# A tiny, fast run: LeNet on the bundled Fashion-MNIST subset.
LENET_ARGS = (
    "--dataset_name=fashion_mnist", "--model_name=lenet", "--batch_size=32", "--optimizer=momentum",
    "--learning_rate=0.01", "--learning_rate_decay_type=fixed", "--num_preprocessing_threads=2", "--seed=0",
)
PROGRESS_LINE = re.compile(
    r"^step=(?P<step>\d+) loss=(?P<loss>\S+) loss_scale=(?P<loss_scale>\S+) skipped=(?P<skipped>\d+) "
    r"lr=(?P<lr>\S+) images/s=(?P<images_per_second>\d+)$"
)


def script_env() -> Dict[str, str]:
    """The environment scripts run in: this checkout first on the path, TensorFlow's C++ INFO lines off, and
    ``faulthandler`` on, so a SIGABRT makes the script print each thread's stack (``finish_or_show_stacks``)."""
    return dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2", PYTHONFAULTHANDLER="1")


def finish_or_show_stacks(process: subprocess.Popen, timeout_s: float) -> Tuple[str, str]:
    """``process.communicate(timeout=timeout_s)``; a process still running then fails the test with its stacks.

    A script started with ``script_env()`` answers the SIGABRT sent at the timeout by printing the
    Python stack of each of its threads to its stderr before it dies, so a hang reads as where it
    hung, not only as a timeout.
    """
    try:
        return process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        try:
            _, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
        raise AssertionError(f"{' '.join(map(str, process.args[1:3]))} still ran after {timeout_s} s; the stacks "
                             f"of its threads (faulthandler):\n{stderr[-8000:]}") from None


@contextlib.contextmanager
def abort_after(process: subprocess.Popen, timeout_s: float) -> Iterator[None]:
    """Within the block, SIGABRT ``process`` if it still runs after ``timeout_s``.

    For a test that reads a script's output line by line before ``finish_or_show_stacks``: a script
    that hangs before the line the test waits for would otherwise block the whole suite; this way its
    output ends, with each thread's stack on its stderr (``script_env``'s faulthandler).
    """
    def abort() -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGABRT)

    timer = threading.Timer(timeout_s, abort)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def sigint_as_in_a_terminal() -> None:
    """``preexec_fn`` of a script a test will Ctrl-C: SIGINT at its default, as a user's terminal gives it.

    A shell starts a background command (``make test &``) with SIGINT ignored and every child
    inherits that, so the script would rightly ignore the test's SIGINT and train on.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# SLIM_MP_TEST_FRESH_PROCESSES=1 runs every script in a fresh interpreter instead of a fork of the preloaded one.
FRESH_PROCESSES_ENV = "SLIM_MP_TEST_FRESH_PROCESSES"
PRELOADED_SERVER = os.path.join(REPO_ROOT, "tests", "support", "preloaded_scripts.py")


class _PreloadedScripts:
    """The client of one ``preloaded_scripts.py`` server for this test process, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: Optional[subprocess.Popen] = None
        self._output_dir = ""
        self._pending = b""
        self._children_cpu_s = 0.0
        self._stopped_servers_cpu_s = 0.0
        self._server_cpu_s = 0.0

    def cpu_seconds(self) -> float:
        """CPU of the servers so far and of the script runs they have finished, in seconds."""
        return self._children_cpu_s + self._stopped_servers_cpu_s + self._server_cpu_s

    def _started(self) -> subprocess.Popen:
        if self._server is None or self._server.poll() is not None:
            self._stopped_servers_cpu_s += self._server_cpu_s
            self._server_cpu_s = 0.0
            self._output_dir = tempfile.mkdtemp(prefix="slim_mp_test_script_output_")
            self._server = subprocess.Popen(
                [sys.executable, PRELOADED_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                env=script_env(),
            )
            self._pending = b""
            atexit.register(self._stop, self._server)
        return self._server

    @staticmethod
    def _stop(server: subprocess.Popen) -> None:
        server.stdin.close()
        server.wait(timeout=60)

    def _reply(self, server: subprocess.Popen, timeout_s: Optional[float]) -> dict:
        """The server's next JSON line; TimeoutError after ``timeout_s`` seconds without one."""
        while b"\n" not in self._pending:
            ready, _, _ = select.select([server.stdout], [], [], timeout_s)
            if not ready:
                raise TimeoutError
            data = os.read(server.stdout.fileno(), 4096)
            assert data, "the preloaded script server died"
            self._pending += data
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)

    def _ended(self, reply: dict) -> int:
        """Count a finished run's CPU (``cpu_report``); its return code."""
        self._children_cpu_s += reply["child_cpu_seconds"]
        self._server_cpu_s = reply["server_cpu_seconds"]
        return reply["returncode"]

    def run(self, argv: List[str]) -> subprocess.CompletedProcess:
        """Run ``python argv...`` in a fork of the server; the result as ``subprocess.run`` gives it."""
        with self._lock:
            server = self._started()
            outputs = tempfile.mkdtemp(dir=self._output_dir)
            stdout_path, stderr_path = os.path.join(outputs, "stdout"), os.path.join(outputs, "stderr")
            for path in (stdout_path, stderr_path):
                open(path, "w").close()
            request = {"script": argv[1], "args": argv[2:], "env": script_env(), "cwd": os.getcwd(),
                       "stdout": stdout_path, "stderr": stderr_path}
            server.stdin.write(json.dumps(request).encode() + b"\n")
            pid = self._reply(server, None)["pid"]
            try:
                returncode = self._ended(self._reply(server, TIMEOUT_S))
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self._ended(self._reply(server, None))
                raise subprocess.TimeoutExpired(argv, TIMEOUT_S) from None
            with open(stdout_path, encoding="utf-8") as stdout, open(stderr_path, encoding="utf-8") as stderr:
                process = subprocess.CompletedProcess(argv, returncode, stdout.read(), stderr.read())
            shutil.rmtree(outputs)
            return process


_PRELOADED = _PreloadedScripts()


def server_cpu_seconds() -> float:
    """CPU seconds of this process's preloaded script server and its finished runs (not yet in RUSAGE_CHILDREN)."""
    return _PRELOADED.cpu_seconds()


def run_script(script: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``script`` with ``args`` as ``python script args...`` does; return the finished process (text output).

    The run is a fork of a process that has already imported TensorFlow and slim_mp
    (``preloaded_scripts.py``), which saves the import's seconds on every run; the script itself
    starts fresh in it, as ``__main__``, with this process's environment and working directory.
    Tests of a script's own process handling (signals, streaming output) use ``subprocess`` directly.
    """
    argv = [sys.executable, script, *args]
    if os.environ.get(FRESH_PROCESSES_ENV) == "1":
        return subprocess.run(argv, capture_output=True, text=True, env=script_env(), timeout=TIMEOUT_S)
    return _PRELOADED.run(argv)


def check_ok(process: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert process.returncode == 0, process.stderr[-3000:]
    return process


def check_bad_input(process: subprocess.CompletedProcess, expected_start: str) -> None:
    """Assert the CLI convention for bad input: exit status 2 and one ``error:`` line, last, with no traceback."""
    assert process.returncode == 2, process.stderr[-2000:]
    errors = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(expected_start), process.stderr[-2000:]
    assert errors[0] == process.stderr.strip().splitlines()[-1] and "Traceback" not in process.stderr


def progress_lines(stdout: str) -> List[Dict[str, str]]:
    """The progress lines of a training run's stdout, each as its key=value fields (asserting the format)."""
    lines = [line for line in stdout.splitlines() if line.startswith("step=")]
    matches = [PROGRESS_LINE.match(line) for line in lines]
    assert all(matches), lines
    return [match.groupdict() for match in matches]


def checkpoint_tensor(train_dir: str, name: str):
    """The value of ``name`` in the latest checkpoint of ``train_dir``."""
    return tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir)).get_tensor(name)


@dataclasses.dataclass(frozen=True)
class TrainedRun:
    train_dir: str
    stdout: str


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def trained_lenet(precision: str = "float32", steps: int = 30) -> TrainedRun:
    """LeNet trained once per test session and precision, shared by the workers: read it, do not train on in it."""

    def train(train_dir: str) -> None:
        process = check_ok(run_script(
            TRAIN_SCRIPT, f"--train_dir={train_dir}", f"--precision={precision}",
            f"--max_number_of_steps={steps}", "--log_every_n_steps=10", *LENET_ARGS,
        ))
        with open(f"{train_dir}.stdout", "w", encoding="utf-8") as handle:
            handle.write(process.stdout)

    train_dir = made_once(f"lenet-{precision}-{steps}", train)
    return TrainedRun(train_dir, _read(f"{train_dir}.stdout"))


@dataclasses.dataclass(frozen=True)
class EvaluatedRun:
    metrics: dict
    stdout: str
    eval_dir: str


EVAL_BATCH_SIZE = 300  # does not divide the 2000 test images, so the last, smaller batch is evaluated too


def evaluated_lenet() -> EvaluatedRun:
    """The eval script's float32 metrics.json and stdout for ``trained_lenet()``, run once per test session."""
    train_dir = trained_lenet().train_dir

    def evaluate(eval_dir: str) -> None:
        process = check_ok(run_script(
            EVAL_SCRIPT, f"--checkpoint_path={train_dir}", f"--eval_dir={eval_dir}", "--dataset_name=fashion_mnist",
            "--model_name=lenet", f"--batch_size={EVAL_BATCH_SIZE}",
        ))
        with open(f"{eval_dir}.stdout", "w", encoding="utf-8") as handle:
            handle.write(process.stdout)

    eval_dir = made_once(f"{os.path.basename(train_dir)}-eval", evaluate)
    return EvaluatedRun(json.loads(_read(os.path.join(eval_dir, "metrics.json"))), _read(f"{eval_dir}.stdout"),
                        eval_dir)


PRELOADED_TASK = os.path.join(REPO_ROOT, "tests", "support", "preloaded_task.py")


@contextlib.contextmanager
def preloaded_tasks() -> Iterator[Callable[..., List[str]]]:
    """``command(script, args)``: command lines of long-running tasks forked from one preloaded server.

    For local clusters, whose parameter server and workers run at once and stream their output:
    each task costs a light client's start instead of a TensorFlow import. The server (and with it
    the CPU of its tasks, for ``cpu_report``) ends when the block does. With
    ``SLIM_MP_TEST_FRESH_PROCESSES=1`` the commands start fresh interpreters.
    """
    if os.environ.get(FRESH_PROCESSES_ENV) == "1":
        yield python_command
        return
    socket_path = os.path.join(tempfile.mkdtemp(prefix="slim_mp_test_tasks_"), "socket")
    server = subprocess.Popen(  # -u: the tasks' output streams line by line, as PYTHONUNBUFFERED would
        [sys.executable, "-u", PRELOADED_SERVER, "--tasks", socket_path], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, env=script_env(), preexec_fn=sigint_as_in_a_terminal)  # the tasks inherit it
    try:
        assert json.loads(server.stdout.readline()) == {"listening": socket_path}, "the task server did not start"
        yield lambda script, args=(): [sys.executable, PRELOADED_TASK, socket_path, script, *args]
    finally:
        server.stdin.close()
        server.wait(timeout=60)
        shutil.rmtree(os.path.dirname(socket_path))
