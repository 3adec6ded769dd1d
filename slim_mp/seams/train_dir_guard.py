"""The train dir of a user's loop, kept as our script keeps its own: one process at a time, a damaged checkpoint named.

- ``guard_train_dir``: the step function (at its first step) and the hook (when the session is
  built) take the lock ``--train_dir`` takes (``slim_mp.folder_lock``), until the process exits, so a
  second process in the same train dir gets one error instead of interleaving its checkpoints.
- ``damaged_checkpoint_error``: after the loop failed to restore (tf_slim's bare ``RuntimeError:
  generator didn't yield``, a ``DataLossError`` or ``OutOfRangeError`` from the restore), whether its
  latest checkpoint is damaged: one sentence naming the file, the newest intact checkpoint, and
  the way forward,
- ``set_aside_damaged_checkpoints``: that way forward, a function the user calls: the damaged
  checkpoints newer than the newest intact one move into ``<train dir>/damaged/``, and the state file
  names the intact one, which the loop then resumes from.

The checkpoints are those the loop's ``Saver`` lists in the ``checkpoint`` state file, newest first.

Leaves alone: our own script's train dir (``slim_mp.training.checkpoint_folder`` surveys it and
skips damage by itself).
"""

import os
import shutil
from typing import List, Optional, Tuple

import tensorflow as tf

from slim_mp.checkpoint_check import checkpoint_damage
from slim_mp.folder_lock import hold_train_dir_lock
from slim_mp.seams.official_loops import OfficialLoop

DAMAGED_FOLDER = "damaged"


class DamagedCheckpointError(ValueError):
    """The loop's latest checkpoint cannot be restored; the message names the file and the way forward."""


def guard_train_dir(loop: Optional[OfficialLoop]) -> None:
    """Hold the lock on ``loop``'s train dir until the process exits (when this process writes its checkpoints).

    Raises:
      TrainDirInUseError: another live process holds it; the message names the loop's argument.
    """
    if loop is not None and loop.writes_checkpoints:
        hold_train_dir_lock(loop.train_dir, loop.argument)


def _listed_newest_first(train_dir: str) -> List[str]:
    """The checkpoint prefixes the state file lists, newest first (empty without a state file)."""
    state = tf.train.get_checkpoint_state(train_dir)
    if state is None:
        return []
    paths = list(state.all_model_checkpoint_paths)
    if state.model_checkpoint_path not in paths:
        paths.append(state.model_checkpoint_path)
    return [os.path.basename(path) for path in reversed(paths)]


def _survey(train_dir: str) -> Tuple[List[Tuple[str, str]], Optional[str]]:
    """``([(prefix, what is wrong), ...], newest intact prefix or None)``, newest first, down to the intact one."""
    damaged = []
    for prefix in _listed_newest_first(train_dir):
        problem = checkpoint_damage(train_dir, prefix)
        if problem is None:
            return damaged, prefix
        damaged.append((prefix, problem))
    return damaged, None


def damaged_checkpoint_error(loop: OfficialLoop) -> Optional[DamagedCheckpointError]:
    """The one-sentence error for ``loop``'s damaged latest checkpoint, or None when it is intact (or has none)."""
    if not loop.train_dir or not os.path.isdir(loop.train_dir):
        return None
    damaged, intact = _survey(loop.train_dir)
    if not damaged:
        return None
    problems = "; ".join(problem for _, problem in damaged)
    aside = f"slim_mp.set_aside_damaged_checkpoints({loop.train_dir!r})"
    if intact is None:
        forward = (f"no intact checkpoint is left: restore one from a backup, or call {aside} to move them into "
                   f"{DAMAGED_FOLDER}/ and start over")
    else:
        forward = (f"{intact} is intact: call {aside} to move the damaged one(s) into {DAMAGED_FOLDER}/, then run "
                   f"the same command again to resume from {intact}")
    return DamagedCheckpointError(
        f"{loop.name} cannot restore the latest checkpoint of {loop.names_train_dir()}: {problems}; {forward}.")


def set_aside_damaged_checkpoints(train_dir: str) -> Tuple[str, ...]:
    """Move the damaged checkpoints newer than the newest intact one into ``train_dir/damaged/``; return their prefixes.

    The ``checkpoint`` state file then names the newest intact checkpoint (and the older ones it
    listed), so ``slim.learning.train`` and ``MonitoredTrainingSession`` resume from it; with none
    intact it is removed, and they start over. Nothing is deleted.
    """
    damaged, intact = _survey(train_dir)
    if not damaged:
        return ()
    aside = os.path.join(train_dir, DAMAGED_FOLDER)
    os.makedirs(aside, exist_ok=True)
    moved = tuple(prefix for prefix, _ in damaged)
    for name in sorted(os.listdir(train_dir)):
        if any(name.startswith(prefix + ".") for prefix in moved):
            shutil.move(os.path.join(train_dir, name), os.path.join(aside, name))
    kept = [prefix for prefix in reversed(_listed_newest_first(train_dir)) if prefix not in moved]
    if intact is None:
        os.remove(os.path.join(train_dir, "checkpoint"))
    else:
        tf.compat.v1.train.update_checkpoint_state(
            train_dir, os.path.join(train_dir, intact), [os.path.join(train_dir, prefix) for prefix in kept])
    return moved
