"""Checkpoint names and the ``checkpoint`` state file of a run folder: which prefixes exist, which are listed.

``step_key`` is the one order of checkpoints by step: ``model.ckpt-0`` (the 0-step parity save) is
step 0, and names without a step sort before every step. ``checkpoint_files_by_prefix``,
``read_state`` and the ``latest_checkpoint_*`` functions only read. ``write_state`` is the one
function that writes a run folder's state file (replacing it atomically); it is called by ``atomic_save``
after each save and by ``find_resume_checkpoint`` when it repairs the file before a resume.

Leaves alone: the checkpoint files themselves (``atomic_save`` writes them, ``checkpoint_folder``
checks them), and the folder's lock (``folder_lock``) and disk errors (``disk_errors``).
"""

import contextlib
import os
import re
import socket
from typing import Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

CHECKPOINT_BASENAME = "model.ckpt"
STATE_FILENAME = "checkpoint"
TEMP_DIR_PREFIX = ".saving-"
MAX_TO_KEEP = 5
VARIABLES_LISTED = 10

_CHECKPOINT_FILE = re.compile(re.escape(CHECKPOINT_BASENAME) + r"-(?P<step>\d+)\.(?:index|meta|data-\d+-of-\d+)$")
# The step key of a prefix that names no step: before every checkpoint, step 0 included.
NO_STEP = -1


def writer_tag() -> str:
    """``<host>-<pid>``: who wrote a temporary (``TEMP_DIR_PREFIX`` + tag + ...)."""
    return f"{socket.gethostname()}-{os.getpid()}"


def name_listing(items: Sequence[str]) -> str:
    """Join the first ``VARIABLES_LISTED`` items for an error message, saying how many more there are."""
    more = f" and {len(items) - VARIABLES_LISTED} more" if len(items) > VARIABLES_LISTED else ""
    return "; ".join(items[:VARIABLES_LISTED]) + more


def checkpoint_step(prefix: str) -> Optional[int]:
    """The global step in a ``model.ckpt-<step>`` prefix, or None for other names."""
    match = re.fullmatch(re.escape(CHECKPOINT_BASENAME) + r"-(\d+)", os.path.basename(prefix))
    return int(match.group(1)) if match else None


def step_key(prefix: str) -> int:
    """The step of ``prefix`` for ordering checkpoints (``model.ckpt-0`` is 0); -1 for names without a step."""
    step = checkpoint_step(prefix)
    return NO_STEP if step is None else step


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
    temp_path = os.path.join(train_dir, f"{TEMP_DIR_PREFIX}{writer_tag()}-{STATE_FILENAME}")
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
