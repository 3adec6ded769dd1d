"""Fine-tuning initialisation: restore model variables from a checkpoint before the first training step.

Checkpoint tensors are read in their stored dtype and cast to the variable's dtype, so a
float32 checkpoint fills the float32 master weights unchanged and a checkpoint holding
float16 or bfloat16 tensors restores too. Anything that does not fit (shape, a non-float
dtype change, a missing tensor) is one error listing the variables and the flag that fixes it.

Leaves alone: resuming a run from its own ``--train_dir`` (the loop's saver restores that, and
a folder that already holds a checkpoint turns the fine-tune off), and writing checkpoints.
"""

from typing import Callable, List, Optional, Sequence

import tensorflow as tf
import tf_slim as slim
from absl import logging

from slim_mp.graph_pass import in_scopes
from slim_mp.training.checkpoint_fit import checkpoint_misfits
from slim_mp.train_dir import has_checkpoints, name_listing, resolve_checkpoint

InitFn = Callable[[tf.compat.v1.Session], None]


def _scope_matches_some(scope: str, names: Sequence[str]) -> bool:
    """True if some name of ``names`` lies in ``scope``."""
    return any(in_scopes(name, [scope]) for name in names)


def variables_to_restore(exclude_scopes: Sequence[str] = ()) -> List[tf.Variable]:
    """Return the graph's model variables outside ``exclude_scopes`` (as the original script does)."""
    return [v for v in slim.get_model_variables() if not in_scopes(v.op.name, exclude_scopes)]


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
    missing = [v.op.name for v in variables if v.op.name not in shapes]
    misfits = checkpoint_misfits(reader, {v.op.name: v for v in variables}, _castable)
    if misfits:
        raise ValueError(
            f"checkpoint {checkpoint} does not fit {len(misfits)} model variable(s): "
            f"{name_listing([m.describe() for m in misfits])}; "
            f"add their scopes to --checkpoint_exclude_scopes (e.g. "
            f"--checkpoint_exclude_scopes={_suggested_scopes([m.name for m in misfits])}) to train them from scratch."
        )
    if missing and not ignore_missing_vars:
        raise ValueError(
            f"checkpoint {checkpoint} lacks {len(missing)} model variable(s): {name_listing(missing)}; "
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
