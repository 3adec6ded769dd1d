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
"""

import gc
import json
import os
import runpy
import sys
import time

import numpy  # noqa: F401  (preloaded for the children)
import tensorflow  # noqa: F401
import tf_slim  # noqa: F401

import nets  # noqa: F401
import slim_mp  # noqa: F401
import slim_mp.training.cli  # noqa: F401
import slim_mp.training.loop  # noqa: F401


def _become_the_script(request: dict) -> None:
    """In the forked child: take the request's process state, then run the script as ``__main__``."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for target, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY),
                                (2, request["stderr"], os.O_WRONLY)):
        descriptor = os.open(path, flags)
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
            _become_the_script(request)
            return  # the child ends like `python script.py` does
        print(json.dumps({"pid": pid}), flush=True)
        _, wait_status, usage = os.wait4(pid, 0)
        print(json.dumps({"returncode": _status(wait_status), "child_cpu_seconds": usage.ru_utime + usage.ru_stime,
                          "server_cpu_seconds": time.process_time()}), flush=True)


if __name__ == "__main__":
    serve()
