"""Every script's first import: TensorFlow loads without its start-up notices on the screen, its errors kept there.

Importing TensorFlow prints, before a script reads its flags, lines that report no problem: absl's
"All log messages before absl::InitializeLog() is called are written to STDERR", the oneDNN notice
(``port.cc``) and the CPU-instruction notice (``cpu_feature_guard.cc``, two lines), some of them
twice. Above a script's one ``error:`` line they read as part of the failure. Imported first
(``import quiet_tensorflow_start  # noqa: F401``), this module loads slim_mp, and with it TensorFlow,
while descriptor 2 goes through a filter that drops exactly those lines and passes every other one
on at once: a TensorFlow error, a Python warning, the last words of a crash. The filter is a forked
process reading a pipe, so what TensorFlow writes before it aborts still reaches the screen. Then
descriptor 2 is the terminal again, for everything the script prints.

Leaves alone: TensorFlow's lines after the import (``slim_mp.training.library_logs`` sends those of
the tools with an output folder to a log file), and a process that loaded TensorFlow already.
"""

import os
import re
import sys

# TensorFlow's start-up notices, line by line: none of them reports a problem.
STARTUP_NOTICES = re.compile(
    rb"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    rb"|I\d{4} [\d:.]+ +\d+ (?:port|cpu_feature_guard)\.cc:\d+\] .*"
    rb"|To enable the following instructions: .*, in other operations, rebuild TensorFlow with the appropriate "
    rb"compiler flags\."
)


def _pass_on_all_but_notices(pipe: int, terminal: int) -> None:
    """Copy the lines read from ``pipe`` to ``terminal`` until the pipe ends, leaving out the start-up notices."""
    with os.fdopen(pipe, "rb") as lines:
        for line in lines:
            if not STARTUP_NOTICES.fullmatch(line.rstrip(b"\r\n")):
                os.write(terminal, line)


def import_quietly(module: str) -> None:
    """Import ``module`` with descriptor 2 passed through the filter of start-up notices (a forked process)."""
    pipe_out, pipe_in = os.pipe()
    terminal = os.dup(2)
    sys.stderr.flush()
    filter_pid = os.fork()
    if filter_pid == 0:
        os.close(pipe_in)
        try:
            _pass_on_all_but_notices(pipe_out, terminal)
        finally:
            os._exit(0)
    os.close(pipe_out)
    os.dup2(pipe_in, 2)
    os.close(pipe_in)
    try:
        __import__(module)
    finally:
        sys.stderr.flush()
        os.dup2(terminal, 2)  # the pipe's last writer closes: the filter passes on the rest and ends
        os.close(terminal)
        os.waitpid(filter_pid, 0)


if "tensorflow" not in sys.modules:  # loaded already (a preloaded server's fork): its notices were printed then
    import_quietly("slim_mp")
