"""``python preloaded_task.py SOCKET script.py args...``: run a script as a task forked from a preloaded server.

The command line a test gives a local cluster in place of ``python script.py args...`` (see
``script_runs.preloaded_tasks``): this process imports no TensorFlow; it hands its arguments,
environment, working directory and descriptors 0/1/2 to the ``preloaded_scripts.py --tasks SOCKET``
server, whose fork then runs the script on this process's own pipes. SIGTERM and SIGINT sent here
reach the fork; this process ends as the fork does (its status, or the signal that ended it), and
killing this process kills the fork.
"""

import json
import os
import signal
import socket
import sys


def main(socket_path: str, argv: list) -> None:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(socket_path)
    request = {"script": argv[0], "args": argv[1:], "env": dict(os.environ), "cwd": os.getcwd()}
    socket.send_fds(connection, [json.dumps(request).encode()], [0, 1, 2])
    devnull = os.open(os.devnull, os.O_RDWR)
    for descriptor in (0, 1, 2):  # the pipes end when the fork's copies close, not this process's
        os.dup2(devnull, descriptor)
    replies = connection.makefile("r", encoding="utf-8")
    pid = json.loads(replies.readline())["pid"]
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda received, _frame: os.kill(pid, received))
    returncode = json.loads(replies.readline())["returncode"]
    if returncode < 0:
        signal.signal(-returncode, signal.SIG_DFL)
        os.kill(os.getpid(), -returncode)
    sys.exit(returncode)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
