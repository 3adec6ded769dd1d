"""Atomic checkpoints: a run killed while saving leaves the previous checkpoint listed and loadable.

A save writes into a temporary folder inside ``train_dir``, moves the data files and then the
index into place, and only then rewrites the ``checkpoint`` state file (itself replaced
atomically). Until that last rename, ``tf.train.latest_checkpoint`` still names the previous
checkpoint, whose files are never touched. Old checkpoints beyond ``max_to_keep`` are deleted
after the state file no longer lists them.
"""

import glob
import os
import shutil
import tempfile
from typing import List

import tensorflow as tf

CHECKPOINT_BASENAME = "model.ckpt"
STATE_FILENAME = "checkpoint"
TEMP_DIR_PREFIX = ".saving-"
MAX_TO_KEEP = 5


def _listed_checkpoints(train_dir: str) -> List[str]:
    """Prefixes (relative to ``train_dir``) the state file lists, oldest first."""
    state = tf.train.get_checkpoint_state(train_dir)
    if state is None:
        return []
    return [os.path.basename(path) for path in state.all_model_checkpoint_paths]


def _write_state(train_dir: str, kept: List[str]) -> None:
    """Atomically replace the state file so it names ``kept`` (the last one is the latest).

    The names stay relative to ``train_dir`` (a movable folder). The folder is passed absolute:
    given a relative one, TensorFlow would rewrite the names relative to it as if they were
    relative to the working directory (``../../model.ckpt-N``), and resuming would miss them.
    """
    state = tf.compat.v1.train.generate_checkpoint_state_proto(os.path.abspath(train_dir), kept[-1], kept)
    temp_path = os.path.join(train_dir, f"{TEMP_DIR_PREFIX}{STATE_FILENAME}-{os.getpid()}")
    with open(temp_path, "w", encoding="utf-8") as temp_file:
        temp_file.write(str(state))
        temp_file.flush()
        os.fsync(temp_file.fileno())
    os.replace(temp_path, os.path.join(train_dir, STATE_FILENAME))


def _delete_checkpoint_files(train_dir: str, prefix: str) -> None:
    """Delete the index and data files of checkpoint ``prefix``."""
    for path in glob.glob(os.path.join(train_dir, glob.escape(prefix) + ".*")):
        os.remove(path)


def remove_stale_temporaries(train_dir: str) -> None:
    """Delete what interrupted saves left behind (temporary folders and state files)."""
    for path in glob.glob(os.path.join(train_dir, TEMP_DIR_PREFIX + "*")):
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

    ``saver`` must be built with ``max_to_keep=None`` (this function does the bookkeeping). A step
    that is already the latest checkpoint is not written again, since overwriting the files the
    state file names would not be atomic.
    """
    remove_stale_temporaries(train_dir)
    name = f"{CHECKPOINT_BASENAME}-{global_step}"
    listed = _listed_checkpoints(train_dir)
    if listed and listed[-1] == name:
        return os.path.join(train_dir, name)
    temp_dir = tempfile.mkdtemp(prefix=TEMP_DIR_PREFIX, dir=train_dir)
    try:
        saver.save(session, os.path.join(temp_dir, name), write_meta_graph=False, write_state=False)
        written = sorted(os.listdir(temp_dir), key=lambda file_name: file_name.endswith(".index"))
        for file_name in written:  # the index last: it is what makes a prefix a checkpoint
            os.replace(os.path.join(temp_dir, file_name), os.path.join(train_dir, file_name))
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
    previous = [prefix for prefix in listed if prefix != name]
    kept = (previous + [name])[-max_to_keep:]
    _write_state(train_dir, kept)
    for prefix in previous:
        if prefix not in kept:
            _delete_checkpoint_files(train_dir, prefix)
    return os.path.join(train_dir, name)
