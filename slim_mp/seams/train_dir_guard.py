"""The train dir of a user's loop, kept as our script keeps its own: one process at a time, a damaged checkpoint named.

- ``guard_train_dir``: the step function (at its first step) and the hook (when the session is
  built) take the lock our script takes (``slim_mp.train_dir``), until the process exits, so a second
  process in the same train dir gets one error instead of interleaving its checkpoints.
- ``damaged_checkpoint_error``: after the loop failed to restore (tf_slim's bare ``RuntimeError:
  generator didn't yield``, a ``DataLossError`` or ``OutOfRangeError`` from the restore), whether its
  latest checkpoint is damaged: one sentence naming the file, the newest intact checkpoint, and
  the way forward,
- ``set_aside_damaged_checkpoints`` (``slim_mp.train_dir``): that way forward, a function the user
  calls.

The checkpoints are judged by the survey our loop resumes with (``slim_mp.train_dir``'s
``survey_checkpoints``: those the ``checkpoint`` state file lists and those whose files are present),
so a user's loop and our script pick the same checkpoint in the same folder.

Leaves alone: our own script's train dir (its loop skips damage by itself).
"""

import os
from typing import Optional

from slim_mp.config_fields import ArgumentError
from slim_mp.seams.official_loops import OfficialLoop
from slim_mp.train_dir import DAMAGED_FOLDER, hold_train_dir_lock, survey_checkpoints


class DamagedCheckpointError(ArgumentError):
    """The loop's latest checkpoint cannot be restored; the message names the file and the way forward."""


def guard_train_dir(loop: Optional[OfficialLoop]) -> None:
    """Hold the lock on ``loop``'s train dir until the process exits (when this process writes its checkpoints).

    Raises:
      TrainDirInUseError: another live process holds it; the message names the loop's argument.
    """
    if loop is not None and loop.writes_checkpoints:
        hold_train_dir_lock(loop.train_dir, loop.argument)


def damaged_checkpoint_error(loop: OfficialLoop) -> Optional[DamagedCheckpointError]:
    """The one-sentence error for ``loop``'s damaged latest checkpoint, or None when it is intact (or has none)."""
    if not loop.train_dir or not os.path.isdir(loop.train_dir):
        return None
    survey = survey_checkpoints(loop.train_dir)
    if not survey.damaged:
        return None
    problems, intact = "; ".join(survey.problems), survey.chosen
    aside = f"slim_mp.set_aside_damaged_checkpoints({loop.train_dir!r})"
    if intact is None:
        forward = (f"no intact checkpoint is left: restore one from a backup, or call {aside} to move them into "
                   f"{DAMAGED_FOLDER}/ and start over")
    else:
        forward = (f"{intact} is intact: call {aside} to move the damaged one(s) into {DAMAGED_FOLDER}/, then run "
                   f"the same command again to resume from {intact}")
    return DamagedCheckpointError(
        f"{loop.name} cannot restore the latest checkpoint of {loop.names_train_dir()}: {problems}; {forward}.")
