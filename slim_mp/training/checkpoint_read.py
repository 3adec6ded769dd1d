"""One read of a checkpoint for an evaluation: its values and its step through one reader, safe from rotation.

An evaluation started beside a training run reads a folder whose checkpoints come and go: a
trainer that saves every step and keeps the newest ``--max_to_keep`` deletes the oldest at each
save, and with ``--max_to_keep=1`` the newest of a moment ago. ``read_checkpoint_values``
therefore reads what the evaluation needs (the model's values, their shapes and dtypes, the global
step) through one reader, at once, into memory; nothing is opened by name again later, so an
evaluation that finished always has its step. A read that fails while the folder changes under it
is a checkpoint that vanished (rotation); one that fails while the folder stays as it was is damage
(the survey's warning, and the next older one); one that reads but whose variables differ is
another model (``checkpoint_fit``'s error naming the argument that likely differs). A vanished
checkpoint makes the newest be taken again, up to ``ROTATION_ATTEMPTS`` times, before one error says
that rotation removed it.

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
from slim_mp.config_fields import ArgumentError, ArgumentText, argument
from slim_mp.train_dir import (READ_FAILURES, CheckpointInspection, checkpoint_damage, checkpoint_files_by_prefix,
                               has_checkpoints, no_checkpoint_error, read_state, survey_checkpoints,
                               unreadable_checkpoint_error)

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


def _inspection(variables: dict, size_argument: str, before: tuple,
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
        check_checkpoint_fits(path, variables, size_argument, reader)  # the index's shapes and dtypes: read already
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


def check_checkpoint_path(path: str, argument_name: str = "checkpoint_path") -> None:
    """Raise ``ArgumentError`` naming the argument ``argument_name`` when ``path`` is empty, or neither a folder with
    checkpoints nor a checkpoint prefix whose index exists (before a long graph build; nothing is read)."""
    if not path or tf.io.gfile.isdir(path) and not has_checkpoints(path):
        raise no_checkpoint_error(path, argument_name)
    if not tf.io.gfile.isdir(path) and not tf.io.gfile.exists(path + ".index"):
        raise unreadable_checkpoint_error(path, argument_name, f"{os.path.basename(path)}.index is missing")


def read_checkpoint_values(path: str, variables: dict, size_argument: str,
                           argument_name: str = "checkpoint_path") -> CheckpointValues:
    """Read the values of ``variables`` ({checkpoint name: variable}) and the global step from the checkpoint
    ``path`` names (a prefix, or a folder's newest intact checkpoint), through one reader.

    A folder's checkpoint that vanishes while it is read (a trainer's rotation) makes the newest be
    taken again, at most ``ROTATION_ATTEMPTS`` times; damaged ones are skipped with a warning.

    Raises:
      ArgumentError: naming ``argument_name``: no checkpoint, none readable, rotation removed each one tried,
        or (``checkpoint_fit``) a checkpoint of another model, naming the argument that likely differs
        (``size_argument``, the image size's, among them).
    """
    check_checkpoint_path(path, argument_name)
    if not tf.io.gfile.isdir(path):
        return _read_prefix(path, variables, size_argument, argument_name)
    named = f"{argument(argument_name)}={path}"
    vanished: List[str] = []
    for _ in range(ROTATION_ATTEMPTS):
        found: Dict[str, CheckpointValues] = {}
        try:
            survey = survey_checkpoints(path, _inspection(variables, size_argument, _folder_state(path), found))
        except _Vanished as gone:
            logging.info("%s", ArgumentText(f"{named}: {gone.prefix} went away while it was read (a training run's "
                                            "checkpoint rotation); taking the newest checkpoint again"))
            vanished.append(gone.prefix)
            time.sleep(ROTATION_RETRY_SECONDS)
            continue
        survey.raise_if_none_intact(argument_name)
        if survey.chosen is None:
            raise no_checkpoint_error(path, argument_name)
        if survey.damaged:
            logging.warning("%s", survey.skipped_damage(argument_name))
        return found[survey.chosen]
    raise ArgumentError(
        f"{named}: a training run's checkpoint rotation removed each checkpoint taken before it could be "
        f"read ({len(vanished)} tries: {', '.join(vanished)}); let that run keep more (its {argument('max_to_keep')}), "
        "or evaluate a copy of the folder."
    )


def _read_prefix(path: str, variables: dict, size_argument: str, argument_name: str) -> CheckpointValues:
    """``read_checkpoint_values`` for a checkpoint prefix: no other checkpoint is taken in its place."""
    directory, prefix = os.path.split(path)
    directory = directory or os.curdir
    found: Dict[str, CheckpointValues] = {}
    try:
        problem = _inspection(variables, size_argument, _folder_state(directory), found)(directory, prefix)
    except _Vanished:
        raise ArgumentError(
            f"{argument(argument_name)}={path} was removed while it was read (a training run's checkpoint rotation "
            f"keeps only its newest {argument('max_to_keep')}); pass the folder {directory} to evaluate its newest "
            "checkpoint."
        ) from None
    if problem is not None:
        raise unreadable_checkpoint_error(path, argument_name, problem)
    return found[prefix]
