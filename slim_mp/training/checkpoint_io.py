"""Atomic checkpoints: a run killed while saving leaves the previous checkpoint listed and loadable.

A save writes into a temporary folder inside ``train_dir``, moves the data files and the ``.meta``
graph and then the index into place (the index is what makes a prefix a checkpoint), and only
then rewrites the ``checkpoint`` state file (itself replaced atomically). Until that last
rename, ``tf.train.latest_checkpoint`` still names the previous checkpoint, whose files are never
touched. Old checkpoints beyond ``max_to_keep`` are deleted after the state file no longer lists
them. Temporaries carry their writer's host and pid, so a save never deletes those of a live
process; ``train_dir_lock`` keeps a second training process out of the folder altogether.
``disk_write_errors`` turns a full, read-only or forbidden disk into one error naming the folder,
the last good checkpoint and the fix.
"""

import contextlib
import errno
import fcntl
import glob
import os
import re
import shutil
import socket
import tempfile
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import tensorflow as tf
from absl import logging

CHECKPOINT_BASENAME = "model.ckpt"
STATE_FILENAME = "checkpoint"
TEMP_DIR_PREFIX = ".saving-"
LOCK_FILENAME = "train_dir.lock"
MAX_TO_KEEP = 5

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
_TEMP_OWNER = re.compile(re.escape(TEMP_DIR_PREFIX) + r"(?P<host>.+)-(?P<pid>\d+)-[^-]*$")
_CHECKPOINT_FILE = re.compile(re.escape(CHECKPOINT_BASENAME) + r"-(?P<step>\d+)\.(?:index|meta|data-\d+-of-\d+)$")


def _owner_tag() -> str:
    """``<host>-<pid>``: who wrote a temporary or holds the lock."""
    return f"{socket.gethostname()}-{os.getpid()}"


def _process_alive(pid: int) -> bool:
    """True if process ``pid`` runs on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def checkpoint_step(prefix: str) -> Optional[int]:
    """The global step in a ``model.ckpt-<step>`` prefix, or None for other names."""
    match = re.fullmatch(re.escape(CHECKPOINT_BASENAME) + r"-(\d+)", os.path.basename(prefix))
    return int(match.group(1)) if match else None


def checkpoint_files_by_prefix(train_dir: str) -> Dict[str, List[str]]:
    """Map each ``model.ckpt-<step>`` prefix present in ``train_dir`` to the names of its files."""
    found: Dict[str, List[str]] = {}
    for name in sorted(os.listdir(train_dir)) if os.path.isdir(train_dir) else ():
        match = _CHECKPOINT_FILE.match(name)
        if match:
            found.setdefault(f"{CHECKPOINT_BASENAME}-{match.group('step')}", []).append(name)
    return found


def read_state(train_dir: str) -> Tuple[List[str], Optional[str]]:
    """Return (prefixes the state file lists, oldest first; what is wrong with it, or None).

    A missing state file is not a problem (nothing saved yet); one that cannot be decoded or
    parsed, or that names no latest checkpoint, is described so the caller can rebuild it.
    """
    path = os.path.join(train_dir, STATE_FILENAME)
    if not os.path.exists(path):
        return [], None
    try:
        state = tf.train.get_checkpoint_state(train_dir)  # None when it does not parse
    except UnicodeDecodeError:
        return [], "it is not text"
    except ValueError:  # parsed, but names no latest checkpoint (e.g. empty)
        state = None
    if state is None or not state.model_checkpoint_path:
        return [], "it does not name the latest checkpoint"
    listed = [os.path.basename(p) for p in state.all_model_checkpoint_paths]
    latest = os.path.basename(state.model_checkpoint_path)
    if latest in listed:
        listed.remove(latest)
    return listed + [latest], None


def write_state(train_dir: str, kept: List[str]) -> None:
    """Atomically replace the state file so it names ``kept`` (the last one is the latest).

    The names stay relative to ``train_dir`` (a movable folder). The folder is passed absolute:
    given a relative one, TensorFlow would rewrite the names relative to it as if they were
    relative to the working directory (``../../model.ckpt-N``), and resuming would miss them.
    """
    state = tf.compat.v1.train.generate_checkpoint_state_proto(os.path.abspath(train_dir), kept[-1], kept)
    temp_path = os.path.join(train_dir, f"{TEMP_DIR_PREFIX}{_owner_tag()}-{STATE_FILENAME}")
    try:
        with open(temp_path, "w", encoding="utf-8") as temp_file:
            temp_file.write(str(state))
            temp_file.flush()
            os.fsync(temp_file.fileno())
        os.replace(temp_path, os.path.join(train_dir, STATE_FILENAME))
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temp_path)
        raise


def _delete_checkpoint_files(train_dir: str, prefix: str) -> None:
    """Delete the index and data files of checkpoint ``prefix``."""
    for path in glob.glob(os.path.join(train_dir, glob.escape(prefix) + ".*")):
        os.remove(path)


def _left_by_dead_process(name: str) -> bool:
    """True for a temporary of this host whose writer no longer runs (or that names no writer)."""
    match = _TEMP_OWNER.match(name)
    if not match:
        return True
    if match.group("host") != socket.gethostname():
        return False  # another machine's process: cannot tell whether it still runs
    pid = int(match.group("pid"))
    return pid != os.getpid() and not _process_alive(pid)


def remove_stale_temporaries(train_dir: str) -> None:
    """Delete what interrupted saves of dead processes left behind (temporary folders and state files)."""
    for path in glob.glob(os.path.join(train_dir, TEMP_DIR_PREFIX + "*")):
        if not _left_by_dead_process(os.path.basename(path)):
            continue
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.remove(path)


def atomic_save(
    saver: tf.compat.v1.train.Saver,
    session: tf.compat.v1.Session,
    train_dir: str,
    global_step: int,
    max_to_keep: int = MAX_TO_KEEP,
) -> str:
    """Save ``session``'s variables as ``train_dir/model.ckpt-<global_step>``; return that prefix.

    The checkpoint has a ``.meta`` file (the graph, for ``tf.compat.v1.train.import_meta_graph``).
    ``saver`` must be built with ``max_to_keep=None`` (this function does the bookkeeping). A step
    that is already the latest checkpoint is not written again, since overwriting the files the
    state file names would not be atomic.
    """
    remove_stale_temporaries(train_dir)
    name = f"{CHECKPOINT_BASENAME}-{global_step}"
    listed, _ = read_state(train_dir)
    if listed and listed[-1] == name:
        return os.path.join(train_dir, name)
    temp_dir = tempfile.mkdtemp(prefix=f"{TEMP_DIR_PREFIX}{_owner_tag()}-", dir=train_dir)
    previous = [prefix for prefix in listed if prefix != name]
    kept = (previous + [name])[-max_to_keep:]
    try:
        saver.save(session, os.path.join(temp_dir, name), write_meta_graph=True, write_state=False)
        written = sorted(os.listdir(temp_dir), key=lambda file_name: file_name.endswith(".index"))
        for file_name in written:  # the index last: it is what makes a prefix a checkpoint
            os.replace(os.path.join(temp_dir, file_name), os.path.join(train_dir, file_name))
        write_state(train_dir, kept)
    except BaseException:
        # A save that failed part-way (e.g. a full disk) leaves no files of its own beside the listed checkpoints.
        if name not in listed:
            _delete_checkpoint_files(train_dir, name)
        raise
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
    for prefix in previous:
        if prefix not in kept:
            _delete_checkpoint_files(train_dir, prefix)
    return os.path.join(train_dir, name)


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


def latest_checkpoint_step(train_dir: str) -> Optional[int]:
    """The step of the latest checkpoint the state file of ``train_dir`` lists, or None."""
    listed, _ = read_state(train_dir)
    return checkpoint_step(listed[-1]) if listed else None


def latest_checkpoint_note(train_dir: str) -> str:
    """What the state file of ``train_dir`` says is the latest checkpoint, for an error message."""
    step = latest_checkpoint_step(train_dir)
    if step is None:
        return "no checkpoint was saved yet"
    return f"the last good checkpoint, {CHECKPOINT_BASENAME}-{step} (step {step}), is intact"


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
