"""What ``loss_scale="dynamic"`` means, and the one factory that turns a loss-scale request into a manager.

The library (``enable_mixed_precision``), the training script (``--loss_scale``) and every tool
build their manager here, so "dynamic" backs off the same way everywhere: the policy TF2, Keras and
PyTorch converged on — start at 2**15, halve on every overflow, double after 2000 finite steps.
(``ExponentialUpdateLossScaleManager``'s own defaults stay contrib's — x0.8 every 2 overflows —
so code written for contrib that builds the manager itself behaves as it did.)
"""

import dataclasses
import math
import numbers
from typing import Union

import tensorflow as tf

from slim_mp.loss_scale.managers import (
    ExponentialUpdateLossScaleManager, FixedLossScaleManager, LossScaleManager, NoLossScaling,
)
from slim_mp.precision import PrecisionLike, resolve_precision


@dataclasses.dataclass(frozen=True)
class DynamicLossScale:
    """The knobs of dynamic loss scaling (contrib's ``ExponentialUpdateLossScaleManager`` arguments).

    The defaults are slim_mp's meaning of "dynamic"; the manager validates the values.
    """

    initial_scale: float = 2.0 ** 15
    growth_steps: int = 2000
    growth_ratio: float = 2.0
    backoff_every: int = 1
    backoff_ratio: float = 0.5

    def manager(self) -> ExponentialUpdateLossScaleManager:
        """A new manager with these knobs (it creates its variables in the default graph)."""
        return ExponentialUpdateLossScaleManager(
            self.initial_scale, self.growth_steps, decr_every_n_nan_or_inf=self.backoff_every,
            incr_ratio=self.growth_ratio, decr_ratio=self.backoff_ratio,
        )


DYNAMIC = DynamicLossScale()

LossScaleLike = Union[None, str, float, LossScaleManager]


def parse_loss_scale(loss_scale: LossScaleLike) -> Union[None, str, float, LossScaleManager]:
    """Check a loss-scale request without building anything: ``None``, ``"dynamic"``, a manager, or a fixed scale.

    A fixed scale may be a number or its text (``"128"``, as a command line gives it) and must be
    finite and >= 1; it is returned as a float.

    Raises:
      ValueError: for anything else, naming the accepted values.
    """
    if loss_scale is None or loss_scale == "dynamic" or isinstance(loss_scale, LossScaleManager):
        return loss_scale
    value = math.nan
    if isinstance(loss_scale, str):
        try:
            value = float(loss_scale)
        except ValueError:
            pass
    elif isinstance(loss_scale, numbers.Real) and not isinstance(loss_scale, bool):
        value = float(loss_scale)
    if not math.isfinite(value) or value < 1:
        raise ValueError(
            f"loss_scale={loss_scale!r} is not supported; use 'dynamic', a number >= 1, or a LossScaleManager."
        )
    return value


def make_loss_scale_manager(loss_scale: LossScaleLike, precision: PrecisionLike,
                            dynamic: DynamicLossScale = DYNAMIC) -> LossScaleManager:
    """Turn a loss-scale request into a manager.

    Args:
      loss_scale: ``"dynamic"`` (scaling shaped by ``dynamic``), a fixed scale >= 1 (number or text),
        a ``LossScaleManager`` (returned as is), or ``None`` for the precision's default: dynamic for
        float16, ``NoLossScaling`` for bfloat16, which has float32's exponent range (no scaling, no
        skipped steps; a fixed 1 keeps contrib's skipping).
      precision: the low precision trained in (``float16``/``bfloat16`` or the dtype).
      dynamic: the knobs of dynamic scaling; slim_mp's defaults unless a caller (``--loss_scale_*``) overrides them.

    Returns:
      The manager; a dynamic one creates its variables in the default graph.

    Raises:
      ValueError: for an unknown precision, a bad ``loss_scale`` or out-of-range dynamic knobs.
      TypeError: for dynamic knobs of the wrong type.
    """
    request = parse_loss_scale(loss_scale)
    if isinstance(request, LossScaleManager):
        return request
    if request is None:
        if resolve_precision(precision) != tf.float16:
            return NoLossScaling()
        request = "dynamic"
    if request == "dynamic":
        return dynamic.manager()
    return FixedLossScaleManager(request)


def from_tensorflow_loss_scale(loss_scale: object) -> LossScaleLike:
    """The request of ``tf.compat.v1.mixed_precision.enable_mixed_precision_graph_rewrite``'s ``loss_scale``.

    TensorFlow takes ``"dynamic"``, a number, or one of its ``LossScale`` objects; the objects become
    the same scaling here: ``FixedLossScale(v)`` a fixed ``v``, ``DynamicLossScale(initial_loss_scale,
    increment_period, multiplier)`` a manager that starts at ``initial_loss_scale``, divides by
    ``multiplier`` on every overflow (never below 1) and multiplies by it after ``increment_period``
    finite steps, as TensorFlow's does. Anything else is returned unchanged for ``parse_loss_scale``.

    Raises:
      ValueError: for a ``LossScale`` of another class, which has no equivalent here.
    """
    mixed_precision = tf.compat.v1.mixed_precision
    if isinstance(loss_scale, mixed_precision.FixedLossScale):
        return float(loss_scale.get_config()["loss_scale_value"])
    if isinstance(loss_scale, mixed_precision.DynamicLossScale):
        config = loss_scale.get_config()
        multiplier = float(config["multiplier"])
        return DynamicLossScale(initial_scale=float(config["initial_loss_scale"]),
                                growth_steps=int(config["increment_period"]), growth_ratio=multiplier,
                                backoff_ratio=1.0 / multiplier).manager()
    if isinstance(loss_scale, mixed_precision.LossScale):
        raise ValueError(f"loss_scale={type(loss_scale).__name__}(...) has no slim_mp equivalent; pass 'dynamic', "
                         "a number >= 1, tf.compat.v1.mixed_precision.FixedLossScale/DynamicLossScale, "
                         "or a slim_mp LossScaleManager.")
    return loss_scale
