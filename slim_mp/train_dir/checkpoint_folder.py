"""A folder of checkpoints: which one is newest and intact, for a resume, a fine-tune, an evaluation or a user's loop.

``survey_checkpoints`` is the one survey, which our loop and the user seams both call: it reads
every candidate (those the state file lists and those whose files are present, newest first by
``step_key``) until one is intact, names the damage it sees, and changes nothing.
``CheckpointSurvey.raise_if_none_intact`` is the error when checkpoints exist but none can be used;
``resolve_checkpoint`` and ``has_checkpoints`` only read too. Two functions write, and both leave
the state file naming the survey's choice, so the next restore and the next save continue from it:
``find_resume_checkpoint`` (our loop's resume pick) rewrites the state file when it is damaged or
names another checkpoint; ``set_aside_damaged_checkpoints`` (what a user's loop is told to call)
also moves the damaged checkpoints into ``damaged/``.

Leaves alone: writing checkpoints (``checkpoint_save``), whether a checkpoint fits the model
(``slim_mp.training``), and restoring it (the loop's saver, the fine-tune restore).
"""

import dataclasses
import os
import shutil
from typing import Callable, Optional, Tuple

import tensorflow as tf
from absl import logging

from slim_mp.config_fields import ArgumentError, ArgumentText, argument
from slim_mp.train_dir.checkpoint_check import checkpoint_damage
from slim_mp.train_dir.checkpoint_state import (
    NO_STEP, STATE_FILENAME, checkpoint_files_by_prefix, name_listing, read_state, step_key, write_state,
)

DAMAGED_FOLDER = "damaged"


@dataclasses.dataclass(frozen=True)
class DamagedCheckpoint:
    """A checkpoint prefix that does not read back whole, and what is wrong with it (naming the file)."""

    prefix: str
    problem: str


@dataclasses.dataclass(frozen=True)
class CheckpointSurvey:
    """What ``directory`` holds: the newest intact prefix (or None), the damaged ones newer than it, the state file's
    list (oldest first) and what is wrong with the state file (or None)."""

    directory: str
    chosen: Optional[str]
    damaged: Tuple[DamagedCheckpoint, ...]
    listed: Tuple[str, ...]
    state_problem: Optional[str]

    @property
    def problems(self) -> Tuple[str, ...]:
        """What is wrong with each damaged checkpoint, newest first."""
        return tuple(damaged.problem for damaged in self.damaged)

    @property
    def state_names_chosen(self) -> bool:
        """True when the state file is intact and names the chosen checkpoint as the latest."""
        return self.state_problem is None and bool(self.listed) and self.listed[-1] == self.chosen

    def raise_if_none_intact(self, argument_name: str) -> None:
        """Raise ``ArgumentError`` naming the argument ``argument_name`` (that named the folder) and the damaged files
        when checkpoints exist but none is intact."""
        if self.chosen is None and self.damaged:
            raise ArgumentError(
                f"{argument(argument_name)}={self.directory} holds checkpoints but none is intact: "
                f"{name_listing(self.problems)}; restore them from a backup, or move them away (or pass another "
                f"{argument(argument_name)}) to start over."
            )

    def skipped_damage(self, argument_name: str) -> ArgumentText:
        """The warning that damaged checkpoints were skipped for the chosen one (the folder named by its argument)."""
        return ArgumentText(f"{argument(argument_name)}={self.directory}: skipped damaged checkpoint(s): "
                            f"{'; '.join(self.problems)}; using {self.chosen} instead")


# Says what is wrong with a checkpoint prefix of a folder (naming the file), or None if it is intact.
CheckpointInspection = Callable[[str, str], Optional[str]]


def has_checkpoints(train_dir: str) -> bool:
    """True if ``train_dir``'s state file lists a checkpoint or a checkpoint index is present (damaged or not)."""
    listed, _ = read_state(train_dir)
    present = checkpoint_files_by_prefix(train_dir)
    return bool(listed) or any(name.endswith(".index") for names in present.values() for name in names)


def survey_checkpoints(directory: str, inspect: CheckpointInspection = checkpoint_damage) -> CheckpointSurvey:
    """Find the newest intact checkpoint of ``directory`` without changing anything there.

    Checkpoints are those the state file lists and those whose files are present, newest first
    (by step; prefixes without a step in the state file's order). Files of a save that a kill
    interrupted (no index, newer than the listed latest, state file intact) are not damage.
    ``inspect(directory, prefix)`` judges each candidate until one is intact (by default
    ``checkpoint_damage``; an evaluation keeps the values it reads).
    """
    listed, state_problem = read_state(directory)
    present = checkpoint_files_by_prefix(directory)
    newest_listed = max((step_key(p) for p in listed), default=NO_STEP)

    def newest_first(prefix: str) -> Tuple[int, int]:
        return step_key(prefix), listed.index(prefix) if prefix in listed else NO_STEP

    damaged = []
    for prefix in sorted(set(listed) | set(present), key=newest_first, reverse=True):
        problem = inspect(directory, prefix)
        if problem is None:
            return CheckpointSurvey(directory, prefix, tuple(damaged), tuple(listed), state_problem)
        interrupted_save = (
            state_problem is None and prefix not in listed and step_key(prefix) > newest_listed
            and not os.path.exists(os.path.join(directory, prefix + ".index"))
        )
        if interrupted_save:
            logging.info("Ignoring %s: files of a save that was interrupted", prefix)
            continue
        damaged.append(DamagedCheckpoint(prefix, problem))
    return CheckpointSurvey(directory, None, tuple(damaged), tuple(listed), state_problem)


def no_checkpoint_error(path: str, argument_name: str) -> ArgumentError:
    """The error for ``path`` (named by the argument ``argument_name``) that holds no checkpoint: empty, or a folder
    without one."""
    if not path:
        return ArgumentError(f"{argument(argument_name)} is empty; pass a checkpoint file or a folder holding "
                             "checkpoints.")
    return ArgumentError(f"{argument(argument_name)}={path} is a folder without a checkpoint; pass a folder or file "
                         "with one.")


def unreadable_checkpoint_error(path: str, argument_name: str, problem: str) -> ArgumentError:
    """The error for a checkpoint prefix ``path`` (named by the argument ``argument_name``) that cannot be read."""
    return ArgumentError(f"{argument(argument_name)}={path} is not a readable checkpoint ({problem}); pass a "
                         "checkpoint prefix such as model.ckpt-1000 (without .index) or its folder.")


def resolve_checkpoint(path: str, argument_name: str = "checkpoint_path") -> str:
    """Return the checkpoint prefix ``path`` names: itself, or the latest checkpoint of a folder.

    Raises ``ArgumentError`` naming the argument ``argument_name`` when there is no readable checkpoint there.
    """
    if not path:
        raise no_checkpoint_error(path, argument_name)
    if tf.io.gfile.isdir(path):
        survey = survey_checkpoints(path)
        survey.raise_if_none_intact(argument_name)
        if survey.chosen is None:
            raise no_checkpoint_error(path, argument_name)
        if survey.damaged:
            logging.warning("%s", survey.skipped_damage(argument_name))
        return os.path.join(path, survey.chosen)
    try:
        tf.train.load_checkpoint(path)
    except (tf.errors.OpError, ValueError) as error:
        raise unreadable_checkpoint_error(path, argument_name, type(error).__name__) from error
    return path


def _name_chosen_in_state(survey: CheckpointSurvey) -> None:
    """Rewrite the state file to list the intact checkpoints up to ``survey.chosen``, when it does not name it.

    The checkpoints older than the chosen one are those listed or present with an index; the next
    save keeps the newest ``max_to_keep`` of them.
    """
    if survey.state_names_chosen:
        return
    directory, chosen = survey.directory, survey.chosen
    older = sorted(
        (p for p in set(survey.listed) | set(checkpoint_files_by_prefix(directory))
         if step_key(p) < step_key(chosen) and os.path.exists(os.path.join(directory, p + ".index"))),
        key=step_key,
    )
    write_state(directory, older + [chosen])


def find_resume_checkpoint(train_dir: str) -> Optional[str]:
    """Return the newest intact checkpoint of ``train_dir`` to resume from, or None if it holds none.

    Damaged newer checkpoints are skipped with a warning naming their files; the state file is
    rewritten from the files present when it is damaged or does not name the checkpoint chosen.

    Raises:
      ArgumentError: naming ``train_dir`` and the damaged files when checkpoints exist but none is intact.
    """
    survey = survey_checkpoints(train_dir)
    survey.raise_if_none_intact("train_dir")
    if survey.chosen is None:
        return None
    named = f"{argument('train_dir')}={train_dir}"
    if survey.damaged:
        logging.warning("%s", ArgumentText(f"{named}: skipped damaged checkpoint(s): {'; '.join(survey.problems)}; "
                                           f"resuming from {survey.chosen} instead"))
    if survey.state_problem is not None:
        logging.warning("%s", ArgumentText(f"{named}: the checkpoint state file was damaged ({survey.state_problem}); "
                                           "rebuilt it from the checkpoint files present"))
    _name_chosen_in_state(survey)
    return os.path.join(train_dir, survey.chosen)


def set_aside_damaged_checkpoints(train_dir: str) -> Tuple[str, ...]:
    """Move the damaged checkpoints newer than the newest intact one into ``train_dir/damaged/``; return their prefixes.

    The ``checkpoint`` state file then names the checkpoint ``find_resume_checkpoint`` would resume
    from (and the older ones), so ``slim.learning.train`` and ``MonitoredTrainingSession`` resume
    from it; with none intact it is removed, and they start over. Nothing is deleted.
    """
    survey = survey_checkpoints(train_dir)
    moved = tuple(damaged.prefix for damaged in survey.damaged)
    if moved:
        aside = os.path.join(train_dir, DAMAGED_FOLDER)
        os.makedirs(aside, exist_ok=True)
        for name in sorted(os.listdir(train_dir)):
            if any(name.startswith(prefix + ".") for prefix in moved):
                shutil.move(os.path.join(train_dir, name), os.path.join(aside, name))
    if survey.chosen is not None:
        _name_chosen_in_state(survey)
    elif moved and os.path.exists(os.path.join(train_dir, STATE_FILENAME)):
        os.remove(os.path.join(train_dir, STATE_FILENAME))
    return moved
