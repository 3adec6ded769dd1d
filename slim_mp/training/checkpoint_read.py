"""One read of a checkpoint for an evaluation: its values and its step through one reader, safe from rotation.

An evaluation started beside a training run reads a folder whose checkpoints come and go: a
trainer that saves every step and keeps the newest ``--max_to_keep`` deletes the oldest at each
save, and with ``--max_to_keep=1`` the newest of a moment ago. ``read_checkpoint_values``
therefore reads what the evaluation needs (the model's values, their shapes and dtypes, the global
step) through one reader, at once, into memory; nothing is opened by name again later, so an
evaluation that finished always has its step. A read that fails while the folder changes under it
is a checkpoint that vanished (rotation); one that fails while the folder stays as it was is damage
(the survey's warning, and the next older one); one that reads but whose variables differ is
another model (``checkpoint_fit``'s error naming the flag). A vanished checkpoint makes the newest
be taken again, up to ``ROTATION_ATTEMPTS`` times, before one error says that rotation removed it.

Leaves alone: the choice among damaged and intact checkpoints (``slim_mp.train_dir``'s survey, into
which this module's inspection plugs) and the restore into a session (``evaluation``).
"""

import dataclasses
import os
import time
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from slim_mp.training.checkpoint_fit import check_checkpoint_complete, check_checkpoint_fits
from slim_mp.train_dir import (READ_FAILURES, CheckpointInspection, checkpoint_damage, checkpoint_files_by_prefix,
                               has_checkpoints, read_state, survey_checkpoints)

ROTATION_ATTEMPTS = 5
ROTATION_RETRY_SECONDS = 0.2
_GLOBAL_STEP = tf.compat.v1.GraphKeys.GLOBAL_STEP


@dataclasses.dataclass(frozen=True)
class CheckpointValues:
    """What one read of a checkpoint gave: its prefix, ``{checkpoint name: value}`` and its global step (or None)."""

    prefix: str
    values: Dict[str, np.ndarray]
    global_step: Optional[int]


class _Vanished(Exception):
    """The files of checkpoint ``prefix`` went away while it was read."""

    def __init__(self, prefix: str):
        super().__init__(prefix)
        self.prefix = prefix


def _folder_state(directory: str) -> tuple:
    """The checkpoints of ``directory`` as they are now (the state file's list, each prefix's files), to compare."""
    listed, state_problem = read_state(directory)
    present = checkpoint_files_by_prefix(directory)
    return tuple(listed), state_problem, tuple(sorted((prefix, tuple(names)) for prefix, names in present.items()))


def _inspection(variables: dict, size_flag: str, before: tuple,
                found: Dict[str, CheckpointValues]) -> CheckpointInspection:
    """A survey inspection that reads each candidate's values for ``variables`` into ``found`` (by prefix).

    Raises (through the survey): ``_Vanished`` when a read fails and the folder is no longer as
    ``before`` (``_folder_state`` taken before the survey listed it); ValueError from ``checkpoint_fit``
    when a readable checkpoint does not fit the model.
    """

    def inspect(directory: str, prefix: str) -> Optional[str]:
        path = os.path.join(directory, prefix)
        try:
            reader = tf.train.load_checkpoint(path)
        except READ_FAILURES:
            return _failure(directory, prefix, before)
        check_checkpoint_fits(path, variables, size_flag, reader)  # the index's shapes and dtypes: read already
        check_checkpoint_complete(path, variables, reader)
        try:
            values = {name: reader.get_tensor(name) for name in variables}
            step = int(reader.get_tensor(_GLOBAL_STEP)) if reader.has_tensor(_GLOBAL_STEP) else None
        except READ_FAILURES:
            return _failure(directory, prefix, before)
        found[prefix] = CheckpointValues(path, values, step)
        return None

    return inspect


def _failure(directory: str, prefix: str, before: tuple) -> str:
    """What is wrong with ``prefix``, whose read just failed: damage named as the survey names it.

    Raises:
      _Vanished: the folder is no longer as it was before the read (its files went away under it).
    """
    if _folder_state(directory) != before:
        raise _Vanished(prefix)
    return checkpoint_damage(directory, prefix) or f"{prefix} cannot be read"


def check_checkpoint_path(path: str, flag: str = "--checkpoint_path") -> None:
    """Raise ValueError naming ``flag`` when ``path`` is empty, or neither a folder with checkpoints nor a checkpoint
    prefix whose index exists (before a long graph build; nothing is read)."""
    if not path:
        raise ValueError(f"{flag} is empty; pass a checkpoint file or a folder holding checkpoints.")
    if tf.io.gfile.isdir(path):
        if not has_checkpoints(path):
            raise ValueError(_NO_CHECKPOINT.format(flag=flag, path=path))
    elif not tf.io.gfile.exists(path + ".index"):
        raise ValueError(_UNREADABLE.format(flag=flag, path=path, problem=f"{os.path.basename(path)}.index is missing"))


_NO_CHECKPOINT = "{flag}={path} is a folder without a checkpoint; pass a folder or file with one."
_UNREADABLE = ("{flag}={path} is not a readable checkpoint ({problem}); pass a checkpoint prefix such as "
               "model.ckpt-1000 (without .index) or its folder.")


def read_checkpoint_values(path: str, variables: dict, size_flag: str,
                           flag: str = "--checkpoint_path") -> CheckpointValues:
    """Read the values of ``variables`` ({checkpoint name: variable}) and the global step from the checkpoint
    ``path`` names (a prefix, or a folder's newest intact checkpoint), through one reader.

    A folder's checkpoint that vanishes while it is read (a trainer's rotation) makes the newest be
    taken again, at most ``ROTATION_ATTEMPTS`` times; damaged ones are skipped with a warning.

    Raises:
      ValueError: naming ``flag``: no checkpoint, none readable, rotation removed each one tried,
        or (``checkpoint_fit``) a checkpoint of another model, naming the flag that likely differs.
    """
    check_checkpoint_path(path, flag)
    if not tf.io.gfile.isdir(path):
        return _read_prefix(path, variables, size_flag, flag)
    vanished: List[str] = []
    for _ in range(ROTATION_ATTEMPTS):
        found: Dict[str, CheckpointValues] = {}
        try:
            survey = survey_checkpoints(path, _inspection(variables, size_flag, _folder_state(path), found))
        except _Vanished as gone:
            logging.info("%s=%s: %s went away while it was read (a training run's checkpoint rotation); taking "
                         "the newest checkpoint again", flag, path, gone.prefix)
            vanished.append(gone.prefix)
            time.sleep(ROTATION_RETRY_SECONDS)
            continue
        survey.raise_if_none_intact(flag)
        if survey.chosen is None:
            raise ValueError(_NO_CHECKPOINT.format(flag=flag, path=path))
        if survey.damaged:
            logging.warning("%s=%s: skipped damaged checkpoint(s): %s; using %s instead",
                            flag, path, "; ".join(survey.problems), survey.chosen)
        return found[survey.chosen]
    raise ValueError(
        f"{flag}={path}: a training run's checkpoint rotation removed each checkpoint taken before it could be "
        f"read ({len(vanished)} tries: {', '.join(vanished)}); let that run keep more (its --max_to_keep), or "
        "evaluate a copy of the folder."
    )


def _read_prefix(path: str, variables: dict, size_flag: str, flag: str) -> CheckpointValues:
    """``read_checkpoint_values`` for a checkpoint prefix: no other checkpoint is taken in its place."""
    directory, prefix = os.path.split(path)
    directory = directory or os.curdir
    found: Dict[str, CheckpointValues] = {}
    try:
        problem = _inspection(variables, size_flag, _folder_state(directory), found)(directory, prefix)
    except _Vanished:
        raise ValueError(
            f"{flag}={path} was removed while it was read (a training run's checkpoint rotation keeps only its "
            f"newest --max_to_keep); pass the folder {directory} to evaluate its newest checkpoint."
        ) from None
    if problem is not None:
        raise ValueError(_UNREADABLE.format(flag=flag, path=path, problem=problem))
    return found[prefix]
