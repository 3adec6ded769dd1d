"""Does a checkpoint fit this model? Shapes, dtypes and missing variables, each named with the argument that fixes it.

``check_checkpoint_fits`` and ``check_checkpoint_complete`` guard a resume and an evaluation (the
checkpoint must hold every variable, in its shape and dtype); ``checkpoint_misfits`` is the
comparison they share with the fine-tune restore, which allows float-to-float casts.

Leaves alone: which checkpoint is used (``slim_mp.train_dir``'s survey) and the restore itself.
"""

import dataclasses
from typing import Callable, List, Sequence, Tuple

import tensorflow as tf

from slim_mp.config_fields import ArgumentError, argument
from slim_mp.loss_scale import LOSS_SCALE_STATE_NAMES
from slim_mp.train_dir import name_listing

# The suffix tf.compat.v1.train.ExponentialMovingAverage gives the checkpoint names of its averages.
MOVING_AVERAGE_NAME = "ExponentialMovingAverage"


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


def checkpoint_misfits(reader, variables: dict, dtype_fits: Callable[[tf.DType, tf.DType], bool]) -> List[Misfit]:
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


def _likely_argument(misfit: Misfit, size_argument: str) -> str:
    """The argument (marked) that most likely differs between the run that wrote a checkpoint and this one."""
    if misfit.checkpoint_dtype != misfit.model_dtype:
        return argument("precision")
    if len(misfit.checkpoint_shape) != len(misfit.model_shape):
        return argument("model_name")
    if misfit.checkpoint_shape[-1:] != misfit.model_shape[-1:]:
        return f"{argument('labels_offset')} (or {argument('dataset_name')})"  # the class count
    return argument(size_argument)


def _missing_hint(missing: Sequence[str], stored: Sequence[str]) -> str:
    """The argument (marked) that most likely made the model have variables the checkpoint lacks."""
    if all(name.rsplit("/", 1)[-1] in LOSS_SCALE_STATE_NAMES for name in missing):
        return f"{argument('precision')} (the checkpoint has no loss-scale state)"
    if all(name.endswith(f"/{MOVING_AVERAGE_NAME}") for name in missing):
        return f"{argument('moving_average_decay')} (the checkpoint has no moving averages)"
    stored_names = set(stored)
    if all(name.rsplit("/", 1)[0] in stored_names for name in missing):
        return f"{argument('optimizer')} (these are optimizer slots)"
    return argument("model_name")


def check_checkpoint_fits(checkpoint: str, variables: dict, size_argument: str, reader=None) -> None:
    """Raise ``ArgumentError`` unless each variable of ``variables`` ({checkpoint name: variable}) that ``checkpoint``
    holds has its shape and dtype there; the message names the variable, both shapes and the argument that likely
    differs.

    ``size_argument`` is the caller's image-size argument (``train_image_size``, ``eval_image_size``);
    ``reader``: the checkpoint's reader when the caller already opened it (None opens one).
    """
    misfits = checkpoint_misfits(reader or tf.train.load_checkpoint(checkpoint), variables,
                                 lambda stored, wanted: stored == wanted)
    if misfits:
        raise ArgumentError(
            f"checkpoint {checkpoint} does not fit this model: {name_listing([m.describe() for m in misfits])}; "
            f"it was likely written with another {_likely_argument(misfits[0], size_argument)}: pass the value it was "
            "written with (or another folder)."
        )


def check_checkpoint_complete(checkpoint: str, variables: dict, reader=None) -> None:
    """Raise ``ArgumentError`` naming the variables of ``variables`` ({checkpoint name: variable}) that ``checkpoint``
    lacks, and the argument that likely differs (a resume or an evaluation needs every one of them); ``reader`` as
    above."""
    shapes = (reader or tf.train.load_checkpoint(checkpoint)).get_variable_to_shape_map()
    missing = [name for name in variables if name not in shapes]
    if missing:
        raise ArgumentError(
            f"checkpoint {checkpoint} lacks {len(missing)} variable(s) of this model: {name_listing(missing)}; "
            f"it was likely written with another {_missing_hint(missing, list(shapes))}: pass the value it was "
            "written with (or another folder)."
        )
