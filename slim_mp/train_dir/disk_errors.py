"""A run's folder (a train dir, an eval dir): a refused write as one error.

``disk_write_errors`` turns a full, read-only or forbidden disk into one error naming the folder,
what the failure left intact (the last good checkpoint) and the fix.

Leaves alone: what is written there (checkpoints: ``checkpoint_save``; the state file:
``checkpoint_state``), creating the folder (the training application) and keeping a second
process out of it (``folder_lock``, shared with the user seams).
"""

import contextlib
import errno
import os
import re
from typing import Callable, Iterator, Optional, Tuple

import tensorflow as tf

from slim_mp.config_fields import ArgumentError, argument

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


class DiskWriteError(ArgumentError):
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
def disk_write_errors(directory: str, argument_name: str, what_is_safe: Callable[[], str]) -> Iterator[None]:
    """Turn a refused write into ``directory`` inside the block into a ``DiskWriteError`` naming the argument
    ``argument_name`` (that named the folder).

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
            f"cannot write to {argument(argument_name)}={directory} ({reason}); {what_is_safe()}: {_DISK_FIXES[code]} "
            f"(or pass another {argument(argument_name)}), then run the same command again."
        ) from None
