"""Fine-tuning initialisation: restore model variables from a checkpoint before the first training step.

Checkpoint tensors are read in their stored dtype and cast to the variable's dtype, so a
float32 checkpoint fills the float32 master weights unchanged and a checkpoint holding
float16 or bfloat16 tensors restores too. Anything that does not fit (shape, a non-float
dtype change, a missing tensor) is one error listing the variables and the flag that fixes it.
"""

import dataclasses
import os
from typing import Callable, List, Optional, Sequence, Tuple

import tensorflow as tf
import tf_slim as slim
from absl import logging

from slim_mp.training.checkpoint_io import (
    MAX_TO_KEEP, checkpoint_files_by_prefix, checkpoint_step, read_state, write_state,
)
from slim_mp.graph_pass import in_scopes
from slim_mp.loss_scale import LOSS_SCALE_STATE_NAMES

InitFn = Callable[[tf.compat.v1.Session], None]

VARIABLES_LISTED = 10


@dataclasses.dataclass(frozen=True)
class Misfit:
    """A model variable whose checkpoint tensor has another shape or an incompatible dtype."""

    name: str
    checkpoint_shape: Tuple[int, ...]
    model_shape: Tuple[int, ...]
    checkpoint_dtype: str
    model_dtype: str

    def describe(self) -> str:
        """``name (checkpoint [..] float16, model [..] float32)``."""
        return (
            f"{self.name} (checkpoint {list(self.checkpoint_shape)} {self.checkpoint_dtype}, "
            f"model {list(self.model_shape)} {self.model_dtype})"
        )


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


def _scope_matches_some(scope: str, names: Sequence[str]) -> bool:
    """True if some name of ``names`` lies in ``scope``."""
    return any(in_scopes(name, [scope]) for name in names)


def variables_to_restore(exclude_scopes: Sequence[str] = ()) -> List[tf.Variable]:
    """Return the graph's model variables outside ``exclude_scopes`` (as the original script does)."""
    return [v for v in slim.get_model_variables() if not in_scopes(v.op.name, exclude_scopes)]


def _listing(items: Sequence[str]) -> str:
    """Join the first ``VARIABLES_LISTED`` items, saying how many more there are."""
    more = f" and {len(items) - VARIABLES_LISTED} more" if len(items) > VARIABLES_LISTED else ""
    return "; ".join(items[:VARIABLES_LISTED]) + more


def _castable(stored: tf.DType, wanted: tf.DType) -> bool:
    """Same dtype, or float to float (e.g. a float16 checkpoint tensor into a float32 variable)."""
    return stored == wanted or (stored.is_floating and wanted.is_floating)


def _misfits(reader, variables: dict, dtype_fits: Callable[[tf.DType, tf.DType], bool]) -> List[Misfit]:
    """The variables of ``variables`` ({checkpoint name: variable}) stored by ``reader`` with another shape, or a
    dtype that ``dtype_fits(stored, wanted)`` rejects; variables the checkpoint lacks are not misfits."""
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    misfits = []
    for name, variable in variables.items():
        if name not in shapes:
            continue
        model_shape = tuple(variable.shape.as_list())
        model_dtype = variable.dtype.base_dtype
        if tuple(shapes[name]) != model_shape or not dtype_fits(dtypes[name], model_dtype):
            misfits.append(Misfit(name, tuple(shapes[name]), model_shape, dtypes[name].name, model_dtype.name))
    return misfits


def _suggested_scopes(names: Sequence[str]) -> str:
    """The comma-separated parent scopes of ``names``: a ready --checkpoint_exclude_scopes value."""
    scopes = sorted({name.rsplit("/", 1)[0] for name in names})
    return ",".join(scopes)


def plan_restore(
    checkpoint: str, variables: Sequence[tf.Variable], ignore_missing_vars: bool
) -> List[tf.Variable]:
    """Return the variables of ``variables`` to restore from ``checkpoint``; raise ValueError if some do not fit."""
    reader = tf.train.load_checkpoint(checkpoint)
    shapes = reader.get_variable_to_shape_map()
    missing = [v.op.name for v in variables if v.op.name not in shapes]
    misfits = _misfits(reader, {v.op.name: v for v in variables}, _castable)
    if misfits:
        raise ValueError(
            f"checkpoint {checkpoint} does not fit {len(misfits)} model variable(s): "
            f"{_listing([m.describe() for m in misfits])}; "
            f"add their scopes to --checkpoint_exclude_scopes (e.g. "
            f"--checkpoint_exclude_scopes={_suggested_scopes([m.name for m in misfits])}) to train them from scratch."
        )
    if missing and not ignore_missing_vars:
        raise ValueError(
            f"checkpoint {checkpoint} lacks {len(missing)} model variable(s): {_listing(missing)}; "
            "pass --ignore_missing_vars "
            f"or add their scopes to --checkpoint_exclude_scopes (e.g. {_suggested_scopes(missing)})."
        )
    if missing:
        logging.warning("Checkpoint %s lacks %d variable(s), left at their initial values: %s",
                        checkpoint, len(missing), ", ".join(missing))
    return [v for v in variables if v.op.name not in missing]


def build_restore_op(checkpoint: str, variables: Sequence[tf.Variable]) -> tf.Operation:
    """Return one op that reads ``variables`` from ``checkpoint`` in their stored dtypes and assigns them cast."""
    dtypes = tf.train.load_checkpoint(checkpoint).get_variable_to_dtype_map()
    names = [v.op.name for v in variables]
    with tf.name_scope("fine_tune_restore"):
        tensors = tf.raw_ops.RestoreV2(
            prefix=checkpoint, tensor_names=names, shape_and_slices=[""] * len(names),
            dtypes=[dtypes[name] for name in names],
        )
        assigns = [
            variable.assign(tf.cast(tensor, variable.dtype.base_dtype), read_value=False)
            for variable, tensor in zip(variables, tensors)
        ]
        return tf.group(*assigns)


def fine_tune_init_fn(
    checkpoint_path: Optional[str],
    exclude_scopes: Sequence[str] = (),
    ignore_missing_vars: bool = False,
    train_dir: Optional[str] = None,
) -> Optional[InitFn]:
    """Return a function that restores the pretrained model variables into a session, or None.

    None when no ``checkpoint_path`` is given, or when ``train_dir`` already holds a checkpoint
    (training then resumes from that instead, as the original script does; logged). Builds its
    ops in the default graph, so call it before the graph is finalized.
    """
    if not checkpoint_path:
        return None
    model_names = [v.op.name for v in slim.get_model_variables()]
    unmatched = [scope for scope in exclude_scopes if not _scope_matches_some(scope, model_names)]
    if unmatched:
        raise ValueError(
            f"--checkpoint_exclude_scopes names {', '.join(unmatched)}, which match(es) no model variable; fix the "
            f"scope names (the model's top scopes: {', '.join(sorted({n.split('/')[0] for n in model_names}))})."
        )
    if train_dir and has_checkpoints(train_dir):
        logging.info("Ignoring --checkpoint_path because a checkpoint already exists in %s", train_dir)
        return None
    checkpoint = resolve_checkpoint(checkpoint_path)
    candidates = variables_to_restore(exclude_scopes)
    if not candidates:
        raise ValueError(
            "--checkpoint_exclude_scopes excludes every model variable, so nothing would be restored; "
            "narrow it or drop --checkpoint_path."
        )
    restored = plan_restore(checkpoint, candidates, ignore_missing_vars)
    restore_op = build_restore_op(checkpoint, restored) if restored else tf.no_op()
    logging.info("Fine-tuning from %s: restoring %d variable(s)", checkpoint, len(restored))

    def init_fn(session: tf.compat.v1.Session) -> None:
        session.run(restore_op)

    return init_fn


# What TensorFlow's checkpoint reader raises for damaged files (its C++ status becomes one of these).
_READ_FAILURES = (tf.errors.OpError, ValueError, IndexError, RuntimeError, OSError)


def has_checkpoints(train_dir: str) -> bool:
    """True if ``train_dir``'s state file lists a checkpoint or a checkpoint index is present (damaged or not)."""
    listed, _ = read_state(train_dir)
    present = checkpoint_files_by_prefix(train_dir)
    return bool(listed) or any(name.endswith(".index") for names in present.values() for name in names)


def _likely_flag(misfit: Misfit, size_flag: str) -> str:
    """The flag that most likely differs between the run that wrote a checkpoint and this one."""
    if misfit.checkpoint_dtype != misfit.model_dtype:
        return "--precision"
    if len(misfit.checkpoint_shape) != len(misfit.model_shape):
        return "--model_name"
    if misfit.checkpoint_shape[-1:] != misfit.model_shape[-1:]:
        return "--labels_offset (or --dataset_name)"  # the class count
    return size_flag


def _missing_hint(missing: Sequence[str], stored: Sequence[str]) -> str:
    """The flag that most likely made the model have variables the checkpoint lacks."""
    if all(name.rsplit("/", 1)[-1] in LOSS_SCALE_STATE_NAMES for name in missing):
        return "--precision (the checkpoint has no loss-scale state)"
    stored_names = set(stored)
    if all(name.rsplit("/", 1)[0] in stored_names for name in missing):
        return "--optimizer (these are optimizer slots)"
    return "--model_name"


def check_checkpoint_fits(checkpoint: str, variables: dict, size_flag: str) -> None:
    """Raise ValueError unless each variable of ``variables`` ({checkpoint name: variable}) that ``checkpoint`` holds
    has its shape and dtype there; the message names the variable, both shapes and the flag that likely differs.

    ``size_flag`` is the image-size flag of the calling script (``--train_image_size``, ``--eval_image_size``).
    """
    misfits = _misfits(tf.train.load_checkpoint(checkpoint), variables, lambda stored, wanted: stored == wanted)
    if misfits:
        raise ValueError(
            f"checkpoint {checkpoint} does not fit this model: {_listing([m.describe() for m in misfits])}; "
            f"it was likely written with another {_likely_flag(misfits[0], size_flag)}: pass the value it was "
            "written with (or another folder)."
        )


def check_checkpoint_complete(checkpoint: str, variables: dict) -> None:
    """Raise ValueError naming the variables of ``variables`` ({checkpoint name: variable}) that ``checkpoint`` lacks,
    and the flag that likely differs (a resume needs every one of them)."""
    shapes = tf.train.load_checkpoint(checkpoint).get_variable_to_shape_map()
    missing = [name for name in variables if name not in shapes]
    if missing:
        raise ValueError(
            f"checkpoint {checkpoint} lacks {len(missing)} variable(s) of this model: {_listing(missing)}; "
            f"it was likely written with another {_missing_hint(missing, list(shapes))}: pass the value it was "
            "written with (or another folder)."
        )


def checkpoint_damage(train_dir: str, prefix: str) -> Optional[str]:
    """Say what is wrong with checkpoint ``prefix`` of ``train_dir`` (naming the file), or None if it is intact.

    Opens the index and reads every tensor (their checksums are verified), so it costs one read
    of the checkpoint.
    """
    path = os.path.join(train_dir, prefix)
    if not os.path.exists(path + ".index"):
        return f"{prefix}.index is missing"
    try:
        reader = tf.train.load_checkpoint(path)
    except _READ_FAILURES as error:
        logging.info("Reading %s.index failed: %s", prefix, error)
        return f"{prefix}.index is damaged"
    data_files = sorted(name for name in os.listdir(train_dir) if name.startswith(prefix + ".data-"))
    try:
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except _READ_FAILURES as error:
        named = data_files[0] if len(data_files) == 1 else f"{prefix}.data-*"
        logging.info("Reading %s failed: %s", named, error)
        return f"{named} is damaged or truncated"
    return None


@dataclasses.dataclass(frozen=True)
class CheckpointSurvey:
    """What a folder of checkpoints holds: the newest intact prefix (or None), the damage seen, the state file."""

    chosen: Optional[str]
    damaged: Tuple[str, ...]
    listed: Tuple[str, ...]
    state_problem: Optional[str]


def survey_checkpoints(directory: str, flag: str) -> CheckpointSurvey:
    """Find the newest intact checkpoint of ``directory`` without changing anything there.

    Checkpoints are those the state file lists and those whose files are present, newest first.
    Files of a save that a kill interrupted (no index, newer than the listed latest, state file
    intact) are not damage.

    Raises:
      ValueError: naming ``flag`` and the damaged files when checkpoints exist but none is intact.
    """
    listed, state_problem = read_state(directory)
    present = checkpoint_files_by_prefix(directory)
    newest_listed = max((checkpoint_step(p) or -1 for p in listed), default=-1)
    candidates = sorted(set(listed) | set(present), key=lambda p: checkpoint_step(p) or -1, reverse=True)
    damaged = []
    for prefix in candidates:
        problem = checkpoint_damage(directory, prefix)
        if problem is None:
            return CheckpointSurvey(prefix, tuple(damaged), tuple(listed), state_problem)
        interrupted_save = (
            state_problem is None and prefix not in listed and (checkpoint_step(prefix) or -1) > newest_listed
            and not os.path.exists(os.path.join(directory, prefix + ".index"))
        )
        if interrupted_save:
            logging.info("Ignoring %s: files of a save that was interrupted", prefix)
            continue
        damaged.append(problem)
    if damaged:
        raise ValueError(
            f"{flag}={directory} holds checkpoints but none is intact: {_listing(damaged)}; "
            f"restore them from a backup, or move them away (or pass another {flag}) to start over."
        )
    return CheckpointSurvey(None, (), tuple(listed), state_problem)


def find_resume_checkpoint(train_dir: str) -> Optional[str]:
    """Return the newest intact checkpoint of ``train_dir`` to resume from, or None if it holds none.

    Damaged newer checkpoints are skipped with a warning naming their files; the state file is
    rebuilt from the files present when it is damaged or does not name the checkpoint chosen.

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
        step = checkpoint_step(chosen) or -1
        older = sorted(
            (p for p in set(survey.listed) | set(checkpoint_files_by_prefix(train_dir))
             if (checkpoint_step(p) or -1) < step and os.path.exists(os.path.join(train_dir, p + ".index"))),
            key=lambda p: checkpoint_step(p) or -1,
        )
        write_state(train_dir, (older + [chosen])[-MAX_TO_KEEP:])
    return os.path.join(train_dir, chosen)
