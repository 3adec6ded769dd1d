"""Atomic checkpoints: a run killed while saving leaves the previous checkpoint listed and loadable.

A save writes into a temporary folder inside ``train_dir``, moves the data files and the ``.meta``
graph and then the index into place (the index is what makes a prefix a checkpoint), and only
then rewrites the ``checkpoint`` state file (itself replaced atomically). Until that last
rename, ``tf.train.latest_checkpoint`` still names the previous checkpoint, whose files are never
touched. Old checkpoints beyond ``max_to_keep`` are deleted after the state file no longer lists
them. Temporaries carry their writer's host and pid, so a save never deletes those of a live
process.

Leaves alone: choosing a checkpoint to resume from (``checkpoint_folder``), the state file's
format (``checkpoint_state``), and keeping a second process out of the folder or reporting a
full disk (``folder_lock``, ``disk_errors``).
"""

import glob
import os
import re
import shutil
import socket
import tempfile

import tensorflow as tf

from slim_mp.train_dir.checkpoint_state import (
    CHECKPOINT_BASENAME, MAX_TO_KEEP, TEMP_DIR_PREFIX, read_state, write_state, writer_tag,
)

_TEMP_OWNER = re.compile(re.escape(TEMP_DIR_PREFIX) + r"(?P<host>.+)-(?P<pid>\d+)-[^-]*$")


def _process_alive(pid: int) -> bool:
    """True if process ``pid`` runs on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    ``saver`` must be built with ``max_to_keep=None`` (this function does the bookkeeping): the
    newest ``max_to_keep`` checkpoints stay listed and on disk (0: every one). A step that is already
    the latest checkpoint is not written again, since overwriting the files the state file names
    would not be atomic.
    """
    remove_stale_temporaries(train_dir)
    name = f"{CHECKPOINT_BASENAME}-{global_step}"
    listed, _ = read_state(train_dir)
    if listed and listed[-1] == name:
        return os.path.join(train_dir, name)
    temp_dir = tempfile.mkdtemp(prefix=f"{TEMP_DIR_PREFIX}{writer_tag()}-", dir=train_dir)
    previous = [prefix for prefix in listed if prefix != name]
    kept = previous + [name] if max_to_keep == 0 else (previous + [name])[-max_to_keep:]
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
