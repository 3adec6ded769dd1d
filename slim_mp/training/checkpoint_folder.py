"""A folder of checkpoints: which one is newest and intact, for a resume, a fine-tune or an evaluation.

``survey_checkpoints`` is the survey: it reads every candidate (newest first, by ``step_key``) and
names the damage it sees, changing nothing. ``resolve_checkpoint`` and ``has_checkpoints`` only
read too. ``find_resume_checkpoint`` is the resume pick and the one function here that writes: it
rewrites the state file (``write_state``) when that is damaged or does not name the checkpoint
picked, so the next save continues from it.

Leaves alone: writing checkpoints (``checkpoint_save``), whether a checkpoint fits the model
(``checkpoint_fit``), and restoring it (the loop's saver, ``fine_tune_restore``).
"""

import dataclasses
import os
from typing import Callable, Optional, Tuple

import tensorflow as tf
from absl import logging

from slim_mp.checkpoint_check import checkpoint_damage
from slim_mp.training.checkpoint_state import (
    NO_STEP, checkpoint_files_by_prefix, name_listing, read_state, step_key, write_state,
)


def has_checkpoints(train_dir: str) -> bool:
    """True if ``train_dir``'s state file lists a checkpoint or a checkpoint index is present (damaged or not)."""
    listed, _ = read_state(train_dir)
    present = checkpoint_files_by_prefix(train_dir)
    return bool(listed) or any(name.endswith(".index") for names in present.values() for name in names)


@dataclasses.dataclass(frozen=True)
class CheckpointSurvey:
    """What a folder of checkpoints holds: the newest intact prefix (or None), the damage seen, the state file."""

    chosen: Optional[str]
    damaged: Tuple[str, ...]
    listed: Tuple[str, ...]
    state_problem: Optional[str]


# Says what is wrong with a checkpoint prefix of a folder (naming the file), or None if it is intact.
CheckpointInspection = Callable[[str, str], Optional[str]]


def survey_checkpoints(directory: str, flag: str,
                       inspect: CheckpointInspection = checkpoint_damage) -> CheckpointSurvey:
    """Find the newest intact checkpoint of ``directory`` without changing anything there.

    Checkpoints are those the state file lists and those whose files are present, newest first.
    Files of a save that a kill interrupted (no index, newer than the listed latest, state file
    intact) are not damage. ``inspect(directory, prefix)`` judges each candidate until one is intact
    (by default ``checkpoint_damage``; an evaluation keeps the values it reads, ``checkpoint_read``).

    Raises:
      ValueError: naming ``flag`` and the damaged files when checkpoints exist but none is intact.
    """
    listed, state_problem = read_state(directory)
    present = checkpoint_files_by_prefix(directory)
    newest_listed = max((step_key(p) for p in listed), default=NO_STEP)
    candidates = sorted(set(listed) | set(present), key=step_key, reverse=True)
    damaged = []
    for prefix in candidates:
        problem = inspect(directory, prefix)
        if problem is None:
            return CheckpointSurvey(prefix, tuple(damaged), tuple(listed), state_problem)
        interrupted_save = (
            state_problem is None and prefix not in listed and step_key(prefix) > newest_listed
            and not os.path.exists(os.path.join(directory, prefix + ".index"))
        )
        if interrupted_save:
            logging.info("Ignoring %s: files of a save that was interrupted", prefix)
            continue
        damaged.append(problem)
    if damaged:
        raise ValueError(
            f"{flag}={directory} holds checkpoints but none is intact: {name_listing(damaged)}; "
            f"restore them from a backup, or move them away (or pass another {flag}) to start over."
        )
    return CheckpointSurvey(None, (), tuple(listed), state_problem)


def resolve_checkpoint(path: str, flag: str = "--checkpoint_path") -> str:
    """Return the checkpoint prefix ``path`` names: itself, or the latest checkpoint of a folder.

    Raises ValueError naming ``flag`` when there is no readable checkpoint there.
    """
    if not path:
        raise ValueError(f"{flag} is empty; pass a checkpoint file or a folder holding checkpoints.")
    if tf.io.gfile.isdir(path):
        survey = survey_checkpoints(path, flag)
        if survey.chosen is None:
            raise ValueError(f"{flag}={path} is a folder without a checkpoint; pass a folder or file with one.")
        if survey.damaged:
            logging.warning("%s=%s: skipped damaged checkpoint(s): %s; using %s instead",
                            flag, path, "; ".join(survey.damaged), survey.chosen)
        return os.path.join(path, survey.chosen)
    try:
        tf.train.load_checkpoint(path)
    except (tf.errors.OpError, ValueError) as error:
        raise ValueError(
            f"{flag}={path} is not a readable checkpoint ({type(error).__name__}); pass a checkpoint prefix "
            "such as model.ckpt-1000 (without .index) or its folder."
        ) from error
    return path


def find_resume_checkpoint(train_dir: str) -> Optional[str]:
    """Return the newest intact checkpoint of ``train_dir`` to resume from, or None if it holds none.

    Damaged newer checkpoints are skipped with a warning naming their files; the state file is
    rewritten from the files present when it is damaged or does not name the checkpoint chosen.

    Raises:
      ValueError: naming ``--train_dir`` and the damaged files when checkpoints exist but none is intact.
    """
    survey = survey_checkpoints(train_dir, "--train_dir")
    chosen = survey.chosen
    if chosen is None:
        return None
    if survey.damaged:
        logging.warning("--train_dir=%s: skipped damaged checkpoint(s): %s; resuming from %s instead",
                        train_dir, "; ".join(survey.damaged), chosen)
    if survey.state_problem is not None or not survey.listed or survey.listed[-1] != chosen:
        if survey.state_problem is not None:
            logging.warning("--train_dir=%s: the checkpoint state file was damaged (%s); rebuilt it from the "
                            "checkpoint files present", train_dir, survey.state_problem)
        older = sorted(
            (p for p in set(survey.listed) | set(checkpoint_files_by_prefix(train_dir))
             if step_key(p) < step_key(chosen) and os.path.exists(os.path.join(train_dir, p + ".index"))),
            key=step_key,
        )
        write_state(train_dir, older + [chosen])  # the next save keeps the newest --max_to_keep of them
    return os.path.join(train_dir, chosen)
