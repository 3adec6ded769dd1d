"""Loss-scale managers: where the loss scale comes from and how it reacts to overflow.

A drop-in for ``tf.contrib.mixed_precision``'s managers (same class names,
arguments, defaults, update rule and checkpoint variables), with argument
validation and two optional bounds (``min_loss_scale``, ``max_loss_scale``).
``LossScaleOptimizer`` (``slim_mp.loss_scale.optimizer``) consumes them.
"""

import abc
import math
import numbers
from typing import List, Optional

import numpy as np
import tensorflow as tf

FLOAT32_MAX = float(np.finfo(np.float32).max)
# contrib's names of ExponentialUpdateLossScaleManager's checkpointed state: scale, good and bad step counts.
LOSS_SCALE_STATE_NAMES = ("loss_scale", "good_steps", "bad_steps")


def _require_number(name: str, value: object) -> float:
    """Return ``value`` as a float, or raise TypeError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a Python number, got {type(value).__name__}; pass e.g. 128.0.")
    return float(value)


def _require_finite_at_least(name: str, value: object, minimum: float) -> float:
    """Return ``value`` as a float if it is finite and >= ``minimum``; raise ValueError naming ``name`` otherwise."""
    number = _require_number(name, value)
    if not math.isfinite(number) or number < minimum:
        raise ValueError(f"{name} must be a finite number >= {minimum:g}, got {value!r}; pass a value in range.")
    return number


def _require_finite_positive(name: str, value: object) -> float:
    """Return ``value`` as a float if it is finite and > 0; raise ValueError naming ``name`` otherwise."""
    number = _require_number(name, value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}; pass a positive value.")
    return number


def _require_period(name: str, value: object) -> int:
    """Return ``value`` if it is an integer >= 1; raise TypeError/ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer step count, got {type(value).__name__}; pass e.g. 2.")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}; pass a positive step count.")
    return int(value)


class LossScaleManager(abc.ABC):
    """Supplies the loss scale and updates it from each step's overflow flag.

    Subclasses implement ``get_loss_scale`` and ``update_loss_scale``; the
    other methods have defaults that suit a scale that never goes down.

    Example of a custom manager that keeps the scale at 256::

        class Always256(LossScaleManager):
            def get_loss_scale(self):
                return tf.constant(256.0)

            def update_loss_scale(self, finite_grads):
                return tf.no_op()
    """

    @abc.abstractmethod
    def get_loss_scale(self) -> tf.Tensor:
        """The loss scale to multiply this step's loss by.

        Returns:
          The current scale as a scalar float32 tensor.
        """

    @abc.abstractmethod
    def update_loss_scale(self, finite_grads: tf.Tensor) -> tf.Operation:
        """Build the op that moves the scale after one step.

        Args:
          finite_grads: scalar bool tensor, True when every gradient of the step was finite.

        Returns:
          An op that updates the scale (and any counters); ``LossScaleOptimizer`` runs it every step.
        """

    def at_min_loss_scale(self) -> tf.Tensor:
        """Return a scalar bool tensor: True when the scale cannot go any lower.

        The divergence guard of ``LossScaleOptimizer`` counts skipped steps
        only while this holds. The default (always True) suits fixed scales.
        """
        return tf.constant(True)

    def variables(self) -> List[tf.Variable]:
        """Return the variables that hold this manager's state (none by default)."""
        return []

    @property
    def skips_nonfinite_steps(self) -> bool:
        """Whether ``LossScaleOptimizer`` checks the gradients and skips steps with inf/NaN (True by default)."""
        return True


class FixedLossScaleManager(LossScaleManager):
    """A constant loss scale; steps with inf/NaN gradients are still skipped by the optimizer.

    It creates no variables, so it adds nothing to checkpoints and can be
    used in any graph.

    Example::

        manager = FixedLossScaleManager(128)
        optimizer = LossScaleOptimizer(tf.compat.v1.train.MomentumOptimizer(0.1, 0.9), manager)
        train_op = optimizer.minimize(loss, global_step=global_step)
    """

    def __init__(self, loss_scale: float) -> None:
        """Keep the scale at ``loss_scale``.

        Args:
          loss_scale: the constant scale, a finite Python number >= 1.

        Raises:
          TypeError: if ``loss_scale`` is not a Python number (a tensor or bool included).
          ValueError: if it is not finite or below 1.
        """
        self._loss_scale = _require_finite_at_least("loss_scale", loss_scale, 1.0)

    def get_loss_scale(self) -> tf.Tensor:
        """Return the fixed scale as a float32 constant in the current graph."""
        return tf.constant(self._loss_scale, dtype=tf.float32, name="loss_scale")

    def update_loss_scale(self, finite_grads: tf.Tensor) -> tf.Operation:
        """Return a no-op: a fixed scale never changes."""
        del finite_grads
        return tf.no_op(name="update_fixed_loss_scale")


class NoLossScaling(LossScaleManager):
    """No scaling and no skipped steps: the step runs exactly as a float32 step would.

    bfloat16's exponent range is float32's, so its gradients need no scaling, and a check for
    inf/NaN gradients that float32 training does not make would cost every step (it waits for all
    gradients before any update: 6-8% of a resnet_v1_18 step at 32 px on a CPU). An inf or NaN
    reaches the loss as it would in float32, where the training loop's divergence check stops it.
    The default for bfloat16 (``slim_mp.loss_scale.policy``); ``FixedLossScaleManager(1)`` keeps
    contrib's skipping.
    """

    def get_loss_scale(self) -> tf.Tensor:
        """Return 1 as a float32 constant in the current graph."""
        return tf.constant(1.0, dtype=tf.float32, name="loss_scale")

    def update_loss_scale(self, finite_grads: tf.Tensor) -> tf.Operation:
        """Return a no-op: the scale is always 1."""
        return tf.no_op(name="no_loss_scale_update")

    @property
    def skips_nonfinite_steps(self) -> bool:
        """False: gradients go to the wrapped optimizer unchecked, as in float32."""
        return False


class ExponentialUpdateLossScaleManager(LossScaleManager):
    """A loss scale that grows after a run of finite steps and shrinks after overflows.

    The rule is contrib's, applied once per step:

    * finite step: when ``incr_every_n_steps`` finite steps have come in a row,
      multiply the scale by ``incr_ratio`` (unless that exceeds
      ``max_loss_scale``, float32's largest value by default) and reset both
      counters; otherwise count one more good step.
    * non-finite step: when ``decr_every_n_nan_or_inf`` bad steps have
      accumulated since the last change (they need not be consecutive),
      multiply the scale by ``decr_ratio``, never below ``min_loss_scale``
      (1 by default), and reset both counters; otherwise count one more bad
      step and clear the good count.

    The state lives in three non-trainable global variables created in the
    current name scope, with contrib's names and dtypes: ``loss_scale``
    (float32), ``good_steps`` and ``bad_steps`` (int32). A default
    ``tf.compat.v1.train.Saver`` saves them, and a TF 1.15 contrib checkpoint
    restores into them.

    Example::

        manager = ExponentialUpdateLossScaleManager(2.0 ** 15, incr_every_n_steps=2000)
        optimizer = LossScaleOptimizer(tf.compat.v1.train.AdamOptimizer(1e-3), manager)
        train_op = optimizer.minimize(loss)
    """

    def __init__(
        self,
        init_loss_scale: float,
        incr_every_n_steps: int,
        decr_every_n_nan_or_inf: int = 2,
        incr_ratio: float = 2,
        decr_ratio: float = 0.8,
        min_loss_scale: float = 1.0,
        max_loss_scale: Optional[float] = None,
    ) -> None:
        """Create the three state variables in the current graph and name scope.

        Args:
          init_loss_scale: the starting scale, a finite number > 0 (e.g. ``2.0 ** 15``).
          incr_every_n_steps: finite steps in a row after which the scale grows; an integer >= 1.
          decr_every_n_nan_or_inf: steps with inf/NaN gradients (since the last change) after which
            the scale shrinks; an integer >= 1.
          incr_ratio: the growth factor, a finite number > 1.
          decr_ratio: the shrink factor, strictly between 0 and 1.
          min_loss_scale: the scale never shrinks below this finite number > 0.
          max_loss_scale: the scale never grows above this finite number > 0; None means float32's
            largest value.

        Raises:
          TypeError: if a scale or ratio is not a Python number, or a step count not an integer.
          ValueError: if a value is out of the range above, or ``max_loss_scale`` is below
            ``min_loss_scale`` or ``init_loss_scale``.
        """
        init_loss_scale = _require_finite_positive("init_loss_scale", init_loss_scale)
        self._incr_every_n_steps = _require_period("incr_every_n_steps", incr_every_n_steps)
        self._decr_every_n_nan_or_inf = _require_period("decr_every_n_nan_or_inf", decr_every_n_nan_or_inf)
        self._incr_ratio = _require_number("incr_ratio", incr_ratio)
        if not math.isfinite(self._incr_ratio) or self._incr_ratio <= 1:
            raise ValueError(f"incr_ratio must be a finite number > 1, got {incr_ratio!r}; pass e.g. 2.")
        self._decr_ratio = _require_number("decr_ratio", decr_ratio)
        if not 0 < self._decr_ratio < 1:
            raise ValueError(f"decr_ratio must lie strictly between 0 and 1, got {decr_ratio!r}; pass e.g. 0.5.")
        self._min_loss_scale = _require_finite_positive("min_loss_scale", min_loss_scale)
        self._max_loss_scale = FLOAT32_MAX if max_loss_scale is None else _require_finite_positive(
            "max_loss_scale", max_loss_scale
        )
        if self._max_loss_scale < max(self._min_loss_scale, init_loss_scale):
            raise ValueError(
                f"max_loss_scale ({self._max_loss_scale:g}) must be at least min_loss_scale and "
                f"init_loss_scale; raise max_loss_scale or lower the others."
            )
        scale_name, good_name, bad_name = LOSS_SCALE_STATE_NAMES
        self._loss_scale = self._state_variable(scale_name, init_loss_scale, tf.float32)
        self._good_steps = self._state_variable(good_name, 0, tf.int32)
        self._bad_steps = self._state_variable(bad_name, 0, tf.int32)

    @staticmethod
    def _state_variable(name: str, initial_value: float, dtype: tf.DType) -> tf.Variable:
        """Create one non-trainable global state variable, named as contrib names it."""
        return tf.compat.v1.Variable(
            initial_value, name=name, dtype=dtype, trainable=False, use_resource=True
        )

    def get_loss_scale(self) -> tf.Tensor:
        """Return the current value of the ``loss_scale`` variable."""
        return self._loss_scale.read_value()

    def at_min_loss_scale(self) -> tf.Tensor:
        """Return True when the scale has reached ``min_loss_scale``."""
        return self._loss_scale.read_value() <= self._min_loss_scale

    def variables(self) -> List[tf.Variable]:
        """Return ``[loss_scale, good_steps, bad_steps]``."""
        return [self._loss_scale, self._good_steps, self._bad_steps]

    def update_loss_scale(self, finite_grads: tf.Tensor) -> tf.Operation:
        """Return an op applying one step of the rule above.

        The scale is written only when it changes: under asynchronous workers sharing the state
        on a parameter server, a worker's finite step must not write back the value it read
        while another worker was shrinking the scale.
        """
        with tf.name_scope("update_loss_scale"):
            finite = tf.convert_to_tensor(finite_grads, dtype=tf.bool)
            scale = self._loss_scale.read_value()
            good = self._good_steps.read_value()
            bad = self._bad_steps.read_value()

            grow_due = tf.logical_and(finite, good + 1 >= self._incr_every_n_steps)
            shrink_due = tf.logical_and(tf.logical_not(finite), bad + 1 >= self._decr_every_n_nan_or_inf)
            grown = scale * self._incr_ratio
            shrunk = tf.maximum(scale * self._decr_ratio, self._min_loss_scale)
            # NaN/inf compare False, so an overflowing product is refused too.
            grow = tf.logical_and(grow_due, grown <= self._max_loss_scale)
            new_scale = tf.where(grow, grown, tf.where(shrink_due, shrunk, scale))

            changed_period = tf.logical_or(grow_due, shrink_due)
            zero = tf.zeros_like(good)
            new_good = tf.where(changed_period | tf.logical_not(finite), zero, good + 1)
            new_bad = tf.where(changed_period, zero, tf.where(finite, bad, bad + 1))
            write_scale = tf.cond(
                tf.not_equal(new_scale, scale),
                lambda: tf.group(self._loss_scale.assign(new_scale, read_value=False)),
                tf.no_op,
            )
            return tf.group(
                write_scale,
                self._good_steps.assign(new_good, read_value=False),
                self._bad_steps.assign(new_bad, read_value=False),
            )
