"""Run scripts in forked copies of one Python process that has already imported TensorFlow.

Every script run of the test suite used to pay a fresh TensorFlow import (6-7 s of CPU on the
test machine), which dominated the many short runs (bad flags, one-step trainings). This server
imports the heavy libraries once and forks a child per request. The child is a separate process,
so each script run still starts from unmodified library state, defines its own flags and gets its
own exit status: it takes the environment, working directory and arguments of the request, points
file descriptors 0/1/2 at /dev/null and the request's output files, and runs the script as
``__main__``. The interpreter then exits as after ``python script.py`` (atexit handlers, flushing,
a traceback and status 1 on an uncaught exception). A run costs about 0.4 s of CPU beyond the
script's own work, against about 8 s for a fresh interpreter (import and exit).

Protocol on stdin/stdout, one JSON object per line: a request
``{"script", "args", "env", "cwd", "stdout", "stderr"}`` is answered by ``{"pid": ...}`` once the
child runs and ``{"returncode": ..., "child_cpu_seconds": ..., "server_cpu_seconds": ...}`` when it
ends (the return code negative for a signal, as ``subprocess`` reports it; the CPU of that run and
the server's own so far, which the client's process cannot see until the server ends). The server
exits at the end of its stdin.

``preloaded_scripts.py --tasks SOCKET`` serves long-running tasks instead (a local cluster's
parameter server and workers), several at a time, through ``preloaded_task.py``: that light
client, started as the task's command, sends over the Unix socket ``SOCKET`` its arguments,
environment, working directory and its descriptors 0/1/2, so the fork reads and writes the
client's own pipes (streamed output) in a session of its own. The server answers ``{"pid": ...}``
and, when the fork ends, ``{"returncode": ...}``; a client that goes away first (killed) takes its
fork with it (SIGKILL). This mode exits at the end of its stdin too.
"""

import gc
import json
import os
import runpy
import select
import signal
import socket
import sys
import time
from typing import Dict, Sequence

import numpy  # noqa: F401  (preloaded for the children)
import tensorflow  # noqa: F401
import tf_slim  # noqa: F401

import nets  # noqa: F401
import slim_mp  # noqa: F401
import slim_mp.training.cli  # noqa: F401
import slim_mp.training.loop  # noqa: F401


def _become_the_script(request: dict, descriptors: Sequence[int]) -> None:
    """In the forked child: ``descriptors`` become 0/1/2, the request's process state is taken, then
    the script runs as ``__main__``."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for target, descriptor in enumerate(descriptors):
        os.dup2(descriptor, target)
        os.close(descriptor)
    script = os.path.abspath(request["script"])
    sys.argv = [script, *request["args"]]
    sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")


def _status(wait_status: int) -> int:
    return -os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else os.WEXITSTATUS(wait_status)


def serve() -> None:
    """Answer requests until stdin ends."""
    gc.freeze()  # the children's exits then leave the preloaded objects' pages shared (5x less exit CPU)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become_the_script(request, [os.open(path, flags) for path, flags in (
                (os.devnull, os.O_RDONLY), (request["stdout"], os.O_WRONLY), (request["stderr"], os.O_WRONLY))])
            return  # the child ends like `python script.py` does
        print(json.dumps({"pid": pid}), flush=True)
        _, wait_status, usage = os.wait4(pid, 0)
        print(json.dumps({"returncode": _status(wait_status), "child_cpu_seconds": usage.ru_utime + usage.ru_stime,
                          "server_cpu_seconds": time.process_time()}), flush=True)


def _send(connection: socket.socket, message: dict) -> None:
    try:
        connection.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the client is gone; its fork is killed when its end of the socket reads as closed


def _start_task(listener: socket.socket, tasks: Dict[socket.socket, int]) -> bool:
    """Accept one client and fork its task; True in the forked child once the script has run."""
    connection, _ = listener.accept()
    message, descriptors, _, _ = socket.recv_fds(connection, 1 << 20, 3)
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        for other in [listener, connection, *tasks]:
            other.close()
        os.setsid()  # as the cluster's ``start_new_session``: a terminal's Ctrl-C reaches the launcher only
        _become_the_script(request, descriptors)
        return True
    for descriptor in descriptors:
        os.close(descriptor)
    tasks[connection] = pid
    _send(connection, {"pid": pid})
    return False


def serve_tasks(socket_path: str) -> None:
    """Fork a task for every client of ``socket_path``, several running at once, until stdin ends."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen()
    gc.freeze()
    tasks: Dict[socket.socket, int] = {}
    print(json.dumps({"listening": socket_path}), flush=True)
    while True:
        ready, _, _ = select.select([sys.stdin, listener, *tasks], [], [], 0.1)
        if sys.stdin in ready and not sys.stdin.readline():
            break
        if listener in ready and _start_task(listener, tasks):
            return  # the child ends like `python script.py` does
        for connection in [c for c in ready if c in tasks]:
            if not connection.recv(1):  # the client went away while its task runs
                os.kill(tasks[connection], signal.SIGKILL)
        for connection, pid in list(tasks.items()):
            ended, wait_status = os.waitpid(pid, os.WNOHANG)
            if ended:
                _send(connection, {"returncode": _status(wait_status)})
                connection.close()
                del tasks[connection]
    for pid in tasks.values():
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--tasks"]:
        serve_tasks(sys.argv[2])
    else:
        serve()
