"""One training process per train dir: an exclusive lock our loop holds for its run, a user's loop for its process.

``train_dir_lock`` is our training loop's (``train_dir``), held for the run; ``hold_train_dir_lock``
is the user seams' (``slim_mp.train_step`` in ``slim.learning.train``, ``TrainStepHook`` in
``MonitoredTrainingSession``), which have no block around the run to hold it in: it is held until
the process exits. Either way a second process gets one error naming the folder (by the argument that
named it) and the holder.

Leaves alone: what the folder holds (checkpoints, events) and creating it.
"""

import atexit
import contextlib
import fcntl
import os
import socket
from typing import Dict, Iterator

from absl import logging

from slim_mp.config_fields import ArgumentError, ArgumentText, argument

LOCK_FILENAME = "train_dir.lock"


class TrainDirInUseError(ArgumentError):
    """Another live process holds the train dir's lock; the message names the folder, the holder and what to do."""


def _lock_holder(handle) -> str:
    """What the lock file says about its holder (``pid N on host H``), or ``an unknown process``."""
    handle.seek(0)
    fields = handle.read().split()
    return f"pid {fields[0]} on host {fields[1]}" if len(fields) == 2 else "an unknown process"


@contextlib.contextmanager
def train_dir_lock(train_dir: str, argument_name: str = "train_dir") -> Iterator[None]:
    """Hold an exclusive lock on ``train_dir`` for the block: one writing process per folder.

    The lock is an ``flock`` on ``train_dir/train_dir.lock``, which the kernel releases when the
    process exits however it dies; the file holds the holder's pid and host for the error a second
    process gets, and is emptied on release. A non-empty file whose lock is free was left by a
    killed process: it is taken over with a warning.

    Raises:
      TrainDirInUseError: naming the argument ``argument_name`` and the holder when another live process holds the lock.
    """
    named = f"{argument(argument_name)}={train_dir}"
    handle = open(os.path.join(train_dir, LOCK_FILENAME), "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TrainDirInUseError(
                f"{named} is in use by another training process ({_lock_holder(handle)}); "
                f"wait for it to finish, stop it, or pass another {argument(argument_name)}."
            ) from None
        previous = _lock_holder(handle)
        if previous != "an unknown process":
            logging.warning("%s", ArgumentText(f"{named}: taking over the lock left by {previous}, which no longer "
                                               "runs"))
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()} {socket.gethostname()}\n")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    finally:
        handle.close()


_HELD: Dict[str, contextlib.ExitStack] = {}


def hold_train_dir_lock(train_dir: str, argument_name: str) -> None:
    """Take ``train_dir``'s lock until this process exits (a no-op when this process holds it already).

    Raises:
      TrainDirInUseError: naming the argument ``argument_name`` and the holder when another live process holds the lock.
    """
    key = os.path.realpath(train_dir)
    if key in _HELD:
        return
    held = contextlib.ExitStack()
    held.enter_context(train_dir_lock(train_dir, argument_name))
    _HELD[key] = held
    atexit.register(held.close)  # the kernel frees the lock at exit anyway; this also empties the file
