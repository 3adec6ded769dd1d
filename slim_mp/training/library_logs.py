"""TensorFlow's and absl's lines to a file, so that a script's screen holds only its own.

TensorFlow's C++ logging writes to file descriptor 2; absl's and TensorFlow's Python loggers and
Python's warnings write to ``sys.stderr`` or streams of their own. ``send_library_logs_to`` points
all of them at one log file and keeps ``sys.stderr`` on the terminal, where the script's progress
and its ``error:`` lines belong.
"""

import logging
import os
import sys

import tensorflow as tf
from absl import logging as absl_logging


def keep_stderr_on_terminal() -> None:
    """Point ``sys.stderr`` at a copy of descriptor 2, so that moving descriptor 2 leaves it where it is.

    A no-op when ``sys.stderr`` already writes elsewhere than descriptor 2 (an earlier call made the copy).
    """
    if sys.stderr is not None and sys.stderr.fileno() == 2:
        sys.stderr = os.fdopen(os.dup(2), "w", buffering=1)


def send_library_logs_to(path: str) -> None:
    """Append TensorFlow's C++ lines (descriptor 2), absl's, TensorFlow's and Python's logging and
    Python's warnings to ``path``; ``sys.stderr`` stays on the terminal (``keep_stderr_on_terminal``).

    TensorFlow's logger has a handler of its own in a process where absl's app did not start (a
    script's worker processes), so both are pointed at the file.

    Raises:
        OSError: ``path`` cannot be opened for appending (check the folder with
            ``model_setup.prepare_output_dir`` first, for an ``error:`` line naming the flag).
    """
    keep_stderr_on_terminal()
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(descriptor, 2)
    os.close(descriptor)
    stream = open(path, "a", buffering=1, encoding="utf-8")
    absl_logging.get_absl_handler().python_handler.stream = stream
    for handler in tf.get_logger().handlers:
        handler.setStream(stream)
    logging.captureWarnings(True)
