"""The run folder (``--train_dir``, ``--eval_dir``): one writing process at a time, and a refused write as one error.

``train_dir_lock`` keeps a second training process out of the folder; ``disk_write_errors`` turns
a full, read-only or forbidden disk into one error naming the folder, what the failure left intact
(the last good checkpoint) and the fix.

Leaves alone: what is written there (checkpoints: ``checkpoint_save``; the state file:
``checkpoint_state``) and creating the folder (``model_setup.prepare_output_dir``).
"""

import contextlib
import errno
import fcntl
import os
import re
import socket
from typing import Callable, Iterator, Optional, Tuple

import tensorflow as tf
from absl import logging

LOCK_FILENAME = "train_dir.lock"

# What the operator does about each way a disk refuses a write.
_DISK_FIXES = {
    errno.ENOSPC: "free space on its disk",
    errno.EDQUOT: "free space within your disk quota",
    errno.EROFS: "remount its file system read-write",
    errno.EACCES: "give this user write permission on it",
    errno.EPERM: "give this user write permission on it",
}
# TensorFlow's and the summary writer's form of those errors: "<path>; No space left on device".
_DISK_MESSAGE = re.compile(
    r"(?P<path>[^\s;']+); (?P<reason>" + "|".join(re.escape(os.strerror(code)) for code in _DISK_FIXES) + ")"
)


class DiskWriteError(ValueError):
    """A folder the run writes to is full, read-only or not writable; the message names it and the fix."""


def _inside(path: Optional[str], directory: str) -> bool:
    """True when ``path`` is ``directory`` or lies under it (paths compared absolute)."""
    if not path:
        return False
    folder = os.path.abspath(directory)
    return os.path.abspath(path) == folder or os.path.abspath(path).startswith(folder + os.sep)


def _refused_write(error: BaseException, directory: str) -> Optional[Tuple[str, int]]:
    """``(reason, errno)`` when ``error`` is a write into ``directory`` that its disk refused, else None."""
    if isinstance(error, OSError) and error.errno in _DISK_FIXES:
        # Python's own writes name the file; a write to an already open file may not (then it is ours).
        if error.filename is None or _inside(error.filename, directory):
            return os.strerror(error.errno), error.errno
        return None
    if isinstance(error, (tf.errors.OpError, RuntimeError)):
        message = error.message if isinstance(error, tf.errors.OpError) else str(error)
        for match in _DISK_MESSAGE.finditer(message):
            if _inside(match.group("path"), directory):
                reason = match.group("reason")
                return reason, next(code for code in _DISK_FIXES if os.strerror(code) == reason)
    return None


@contextlib.contextmanager
def disk_write_errors(directory: str, flag: str, what_is_safe: Callable[[], str]) -> Iterator[None]:
    """Turn a refused write into ``directory`` inside the block into a ``DiskWriteError`` naming ``flag``.

    ``what_is_safe()`` says, for the message, what the failure left intact (e.g. the last good checkpoint).
    Other errors pass through unchanged.
    """
    try:
        yield
    except (OSError, tf.errors.OpError, RuntimeError) as error:
        refused = _refused_write(error, directory)
        if refused is None:
            raise
        reason, code = refused
        raise DiskWriteError(
            f"cannot write to {flag}={directory} ({reason}); {what_is_safe()}: {_DISK_FIXES[code]} "
            f"(or pass another {flag}), then run the same command again."
        ) from None


def _lock_holder(handle) -> str:
    """What the lock file says about its holder (``pid N on host H``), or ``an unknown process``."""
    handle.seek(0)
    fields = handle.read().split()
    return f"pid {fields[0]} on host {fields[1]}" if len(fields) == 2 else "an unknown process"


@contextlib.contextmanager
def train_dir_lock(train_dir: str, flag: str = "--train_dir") -> Iterator[None]:
    """Hold an exclusive lock on ``train_dir`` for the block: one writing process per folder.

    The lock is an ``flock`` on ``train_dir/train_dir.lock``, which the kernel releases when the
    process exits however it dies; the file holds the holder's pid and host for the error a second
    process gets, and is emptied on release. A non-empty file whose lock is free was left by a
    killed process: it is taken over with a warning.

    Raises:
      ValueError: naming ``flag`` and the holder when another live process holds the lock.
    """
    handle = open(os.path.join(train_dir, LOCK_FILENAME), "a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(
                f"{flag}={train_dir} is in use by another training process ({_lock_holder(handle)}); "
                f"wait for it to finish, stop it, or pass another {flag}."
            ) from None
        previous = _lock_holder(handle)
        if previous != "an unknown process":
            logging.warning("%s=%s: taking over the lock left by %s, which no longer runs", flag, train_dir, previous)
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
