"""SIGTERM, the signal of preemption (Kubernetes, Slurm, cloud spot VMs), handled like Ctrl-C.

Inside ``sigterm_as_interrupt()`` a SIGTERM raises ``Terminated``, a ``KeyboardInterrupt``: the
training loop's Ctrl-C path saves the current step and the command-line runner exits with
``Terminated.exit_code`` (143, the status a shell reports for SIGTERM) and one line saying so.
A second SIGTERM while that save runs is ignored, so the save is never cut short by the signal.
"""

import contextlib
import signal
import threading
from typing import Iterator

EXIT_TERMINATED = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM; the message says what was saved.

    ``exit_code`` is the status to exit with; ``signum`` the signal a launcher forwards to its children.
    """

    exit_code = EXIT_TERMINATED
    signum = signal.SIGTERM


def _raise_terminated(signum: int, frame: object) -> None:
    del frame
    signal.signal(signum, signal.SIG_IGN)  # the save that follows must not be interrupted again
    raise Terminated("terminated by SIGTERM")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``Terminated`` (in the main thread; elsewhere the block runs unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
