"""SIGTERM, the signal of preemption (Kubernetes, Slurm, cloud spot VMs): save the current step, then stop.

Our loop: inside ``sigterm_as_interrupt()`` a SIGTERM raises ``Terminated``, a ``KeyboardInterrupt``:
the training loop's Ctrl-C path saves the current step and the command-line runner exits with
``Terminated.exit_code`` (143, the status a shell reports for SIGTERM) and one line saying so.
A second SIGTERM while that save runs is ignored, so the save is never cut short by the signal.

A user's loop (``slim.learning.train``, ``MonitoredTrainingSession``) saves its last step itself
when it stops normally, so there ``SigtermStop`` only records the signal: the step function or hook
that polls it asks the loop to stop after the running step, and the loop's own final save writes it.
Then ``TerminatedAfterSave`` ends the process with the same status as ours (143): slim's Supervisor
raises it once its final save is done, the hook's ``end()`` after the ``CheckpointSaverHook``'s.
"""

import contextlib
import signal
import threading
from typing import Callable, Iterator, Optional, Union

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


class TerminatedAfterSave(SystemExit):
    """Ends a user's loop stopped by SIGTERM once its own final save is done, with our script's status (143)."""

    def __init__(self) -> None:
        super().__init__(EXIT_TERMINATED)


SignalHandler = Union[Callable[[int, object], None], int, None]


class SigtermStop:
    """Records a SIGTERM (main thread only) instead of dying, so a loop can stop and save after the running step.

    ``install`` is idempotent; ``restore`` puts the previous handler back. While installed, every
    further SIGTERM is recorded too (never a second, half-done stop).
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: Optional[SignalHandler] = None
        self._installed = False

    def _record(self, signum: int, frame: object) -> None:
        del signum, frame
        self.requested = True

    def install(self) -> None:
        """Handle SIGTERM by recording it (a no-op outside the main thread or when installed already)."""
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        self._previous = signal.signal(signal.SIGTERM, self._record)
        self._installed = True

    def restore(self) -> None:
        """Give SIGTERM back to the handler that was there before ``install``."""
        if self._installed and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False
