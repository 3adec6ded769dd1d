"""The train dir: one writing process per folder, its checkpoints saved atomically, surveyed and checked for damage.

One room for what a training folder holds, shared by our loop (``slim_mp.training``) and a user's
loop (``slim_mp.seams``), in the order a run meets it: ``folder_lock`` (one training process per
train dir), ``disk_errors`` (a full or read-only disk as one error), ``checkpoint_state`` (checkpoint
names, the step order, the ``checkpoint`` state file), ``checkpoint_save`` (atomic saves),
``checkpoint_check`` (whether one checkpoint reads back whole), ``checkpoint_folder`` (the one survey
of a folder's checkpoints, the resume pick, damaged checkpoints set aside) and ``scaled_checkpoint``
(a copy of a checkpoint with some tensors scaled).

Code outside imports the names below from ``slim_mp.train_dir``, never its modules.

Leaves alone: whether a checkpoint fits a model and restoring it (the training application), and
when a loop saves (its schedule).
"""

from slim_mp.train_dir.checkpoint_check import READ_FAILURES, checkpoint_damage
from slim_mp.train_dir.checkpoint_folder import (DAMAGED_FOLDER, CheckpointInspection, CheckpointSurvey,
                                                 DamagedCheckpoint, find_resume_checkpoint, has_checkpoints,
                                                 no_checkpoint_error, resolve_checkpoint,
                                                 set_aside_damaged_checkpoints, survey_checkpoints,
                                                 unreadable_checkpoint_error)
from slim_mp.train_dir.checkpoint_save import atomic_save
from slim_mp.train_dir.checkpoint_state import (MAX_TO_KEEP, checkpoint_files_by_prefix, checkpoint_step,
                                                latest_checkpoint_note, latest_checkpoint_step, name_listing,
                                                read_state)
from slim_mp.train_dir.disk_errors import DiskWriteError, disk_write_errors
from slim_mp.train_dir.folder_lock import TrainDirInUseError, hold_train_dir_lock, train_dir_lock
from slim_mp.train_dir.scaled_checkpoint import write_scaled_checkpoint

__all__ = [
    "READ_FAILURES", "checkpoint_damage", "DAMAGED_FOLDER", "CheckpointInspection", "CheckpointSurvey",
    "DamagedCheckpoint", "find_resume_checkpoint", "has_checkpoints", "no_checkpoint_error", "resolve_checkpoint",
    "set_aside_damaged_checkpoints", "survey_checkpoints", "unreadable_checkpoint_error", "atomic_save",
    "MAX_TO_KEEP", "checkpoint_files_by_prefix", "checkpoint_step", "latest_checkpoint_note",
    "latest_checkpoint_step", "name_listing", "read_state", "DiskWriteError", "disk_write_errors",
    "TrainDirInUseError", "hold_train_dir_lock", "train_dir_lock", "write_scaled_checkpoint",
]
