"""Fine-tuning initialisation: restore model variables from a checkpoint before the first training step.

Checkpoint tensors are read in their stored dtype and cast to the variable's dtype, so a
float32 checkpoint fills the float32 master weights unchanged and a checkpoint holding
float16 or bfloat16 tensors restores too. Anything that does not fit (shape, a non-float
dtype change, a missing tensor) is one error listing the variables and the flag that fixes it.
"""

import dataclasses
from typing import Callable, List, Optional, Sequence, Tuple

import tensorflow as tf
import tf_slim as slim
from absl import logging

from slim_mp.training.scopes import in_scopes

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
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise ValueError(f"{flag}={path} is a folder without a checkpoint; pass a folder or file with one.")
        return latest
    try:
        tf.train.load_checkpoint(path)
    except (tf.errors.OpError, ValueError) as error:
        raise ValueError(
            f"{flag}={path} is not a readable checkpoint ({type(error).__name__}); pass a checkpoint prefix "
            "such as model.ckpt-1000 (without .index) or its folder."
        ) from error
    return path


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
    dtypes = reader.get_variable_to_dtype_map()
    missing = [v.op.name for v in variables if v.op.name not in shapes]
    misfits = []
    for variable in variables:
        name = variable.op.name
        if name in missing:
            continue
        model_shape = tuple(variable.shape.as_list())
        model_dtype = variable.dtype.base_dtype
        if tuple(shapes[name]) != model_shape or not _castable(dtypes[name], model_dtype):
            misfits.append(Misfit(name, tuple(shapes[name]), model_shape, dtypes[name].name, model_dtype.name))
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
    if train_dir and tf.train.latest_checkpoint(train_dir):
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
