"""``LossScaleOptimizer``: loss scaling around any ``tf.compat.v1.train.Optimizer``.

A drop-in for ``tf.contrib.mixed_precision.LossScaleOptimizer`` that is also
a complete optimizer (slots, ``variables()``), ignores ``None`` gradients,
keeps sparse gradients sparse, reports the loss scale and skipped steps, and
fails clearly when training can only skip.
"""

import numbers
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import tensorflow as tf

from slim_mp.loss_scale.finite_check import GradsAndVars, Gradient, beside, finite_flags
from slim_mp.loss_scale.gradient_order import defer_variable_terms
from slim_mp.loss_scale.managers import LossScaleManager
from slim_mp.loss_scale.skip_monitor import (
    SkipCounters, create_skip_counters, divergence_guard, read_counter, record_step,
)
from slim_mp.loss_scale.slot_init import unfolded_slot_initializers

_HALF_DTYPES = (tf.float16, tf.bfloat16)

# Graph collections holding each train step's loss-scale and skipped-steps tensors, for loops that
# have only the session and graph (a step function of slim.learning.train, a SessionRunHook).
LOSS_SCALE_COLLECTION = "slim_mp_loss_scale"
SKIPPED_STEPS_COLLECTION = "slim_mp_skipped_steps"


def _wide_dtype(dtype: tf.DType) -> tf.DType:
    """Return the dtype to scale in: float32 for half types (so the scale never becomes fp16), else ``dtype``."""
    base = tf.as_dtype(dtype).base_dtype
    return tf.float32 if base in _HALF_DTYPES else base


def scale_loss(loss: tf.Tensor, loss_scale: tf.Tensor) -> tf.Tensor:
    """Return ``loss * loss_scale`` computed in float32 or wider; an fp16 loss is cast up, never the scale down."""
    wide = _wide_dtype(loss.dtype)
    return tf.cast(loss, wide) * tf.cast(loss_scale, wide)


def unscale_gradient(gradient: Gradient, loss_scale: tf.Tensor) -> Gradient:
    """Divide a gradient by the scale in float32 or wider, keeping its dtype and, for IndexedSlices, its sparsity.

    In a cluster the division runs on the task that made the gradient (``finite_check.beside``): the scale crosses,
    not the gradient.
    """
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(
            unscale_gradient(gradient.values, loss_scale), gradient.indices, gradient.dense_shape
        )
    wide = _wide_dtype(gradient.dtype)
    with beside(gradient):
        return tf.cast(tf.cast(gradient, wide) / tf.cast(loss_scale, wide), gradient.dtype)


def _require_resource_variables(variables: Sequence[tf.Variable]) -> None:
    """Raise TypeError if a ref variable would be updated inside a control-flow-v2 ``tf.cond``."""
    if not tf.compat.v1.control_flow_v2_enabled():
        return
    ref_names = [v.op.name for v in variables if v.dtype != v.dtype.base_dtype]
    if ref_names:
        raise TypeError(
            f"grads_and_vars holds ref variables {ref_names[:3]}, which cannot be updated inside the "
            "conditional step; create them as resource variables (use_resource=True)."
        )


class LossScaleOptimizer(tf.compat.v1.train.Optimizer):
    """Wraps an optimizer so that gradients are computed on a scaled loss and steps with inf/NaN are skipped.

    * ``compute_gradients`` multiplies the loss by the manager's scale (in
      float32) and returns **unscaled** ``(gradient, variable)`` pairs, so
      clipping, multipliers and summaries in between see true gradients.
      ``None`` gradients pass through; ``IndexedSlices`` stay sparse.
    * ``apply_gradients`` runs the wrapped update only when every gradient is
      finite; otherwise variables, slots and ``global_step`` stay unchanged
      (``count_skipped_steps=True`` still advances ``global_step``, which
      ``tf.compat.v1.train.SyncReplicasOptimizer`` needs: its gradient
      accumulators move one step per update, applied or not). The manager is
      updated on every step.
    * ``loss_scale`` and ``skipped_steps`` are tensors for progress lines and
      are also written as TensorBoard scalars.
    * Divergence guard: after ``max_consecutive_skips_at_min`` skipped steps
      in a row at the manager's minimum scale, running the train op fails
      with an error naming the variables whose gradients were non-finite.
      ``None`` disables it.
    * With ``NoLossScaling`` (bfloat16's default) none of the above runs: the
      loss is not scaled, no gradient is checked and every step is applied,
      as in float32; ``loss_scale`` and ``skipped_steps`` still read 1 and 0.

    The skip counters are local variables that initialise themselves on the
    first step, so ``tf.compat.v1.global_variables_initializer()`` alone is
    enough (as with contrib) and checkpoints keep contrib's layout.

    Example::

        manager = ExponentialUpdateLossScaleManager(2.0 ** 15, incr_every_n_steps=2000)
        optimizer = LossScaleOptimizer(tf.compat.v1.train.MomentumOptimizer(0.1, 0.9), manager)
        train_op = slim.learning.create_train_op(total_loss, optimizer, clip_gradient_norm=5.0)
        progress = {"loss_scale": optimizer.loss_scale, "skipped": optimizer.skipped_steps}
    """

    def __init__(
        self,
        opt: tf.compat.v1.train.Optimizer,
        loss_scale_manager: LossScaleManager,
        max_consecutive_skips_at_min: Optional[int] = 100,
        name: str = "LossScaleOptimizer",
        count_skipped_steps: bool = False,
    ) -> None:
        """Wrap ``opt``; the skip counters are created with the first train step of each graph.

        Args:
          opt: the ``tf.compat.v1.train.Optimizer`` that computes and applies the updates.
          loss_scale_manager: supplies the loss scale and updates it from each step's overflow flag,
            e.g. ``FixedLossScaleManager`` or ``ExponentialUpdateLossScaleManager``.
          max_consecutive_skips_at_min: skipped steps in a row at the manager's minimum scale after
            which running the train op fails, naming the non-finite gradients; None disables the guard.
          name: the name scope of the ops this optimizer adds.
          count_skipped_steps: advance ``global_step`` on skipped steps too (needed under
            ``tf.compat.v1.train.SyncReplicasOptimizer``).

        Raises:
          TypeError: if ``opt`` is not a ``tf.compat.v1.train.Optimizer`` or ``loss_scale_manager``
            not a ``LossScaleManager``.
          ValueError: if ``max_consecutive_skips_at_min`` is neither None nor a positive integer.
        """
        if not isinstance(opt, tf.compat.v1.train.Optimizer):
            raise TypeError(
                f"opt must be a tf.compat.v1.train.Optimizer, got {type(opt).__name__}; "
                "wrap e.g. tf.compat.v1.train.MomentumOptimizer."
            )
        if not isinstance(loss_scale_manager, LossScaleManager):
            raise TypeError(
                f"loss_scale_manager must be a LossScaleManager, got {type(loss_scale_manager).__name__}; "
                "pass e.g. FixedLossScaleManager(128)."
            )
        if max_consecutive_skips_at_min is not None and (
            isinstance(max_consecutive_skips_at_min, bool)
            or not isinstance(max_consecutive_skips_at_min, numbers.Integral)
            or max_consecutive_skips_at_min < 1
        ):
            raise ValueError(
                f"max_consecutive_skips_at_min must be a positive integer or None, got "
                f"{max_consecutive_skips_at_min!r}; pass e.g. 100, or None to disable the guard."
            )
        super().__init__(use_locking=False, name=name)
        self._optimizer = opt
        self._manager = loss_scale_manager
        self._skip_limit = max_consecutive_skips_at_min
        self._count_skipped_steps = count_skipped_steps
        self._counters_by_graph: Dict[tf.Graph, SkipCounters] = {}
        self.gradients_loss_scale: Optional[tf.Tensor] = None

    @property
    def inner_optimizer(self) -> tf.compat.v1.train.Optimizer:
        """The wrapped optimizer."""
        return self._optimizer

    @property
    def counts_skipped_steps(self) -> bool:
        """True when a skipped step still advances ``global_step`` (see the class docstring)."""
        return self._count_skipped_steps

    @property
    def loss_scale_manager(self) -> LossScaleManager:
        """The manager that supplies and updates the scale."""
        return self._manager

    @property
    def loss_scale(self) -> tf.Tensor:
        """The current loss scale (float32 scalar tensor)."""
        return self._manager.get_loss_scale()

    @property
    def skipped_steps(self) -> tf.Tensor:
        """How many steps this run has skipped for inf/NaN gradients (int64 scalar tensor)."""
        return read_counter(self._counters().skipped_steps)

    def rewrite_losses(self, losses: Sequence[tf.Tensor]) -> List[tf.Tensor]:
        """The tensors to differentiate for ``losses``: the losses themselves here.

        ``MixedPrecisionOptimizer`` overrides it to rewrite their graph in one pass; a caller with
        several losses (model clones) calls it before taking any gradient.
        """
        return list(losses)

    def _counters(self) -> SkipCounters:
        """Return the skip counters of the current graph, creating them on first use."""
        graph = tf.compat.v1.get_default_graph()
        if graph not in self._counters_by_graph:
            self._counters_by_graph[graph] = create_skip_counters()
        return self._counters_by_graph[graph]

    @staticmethod
    def _summarize(loss_scale: tf.Tensor, counters: SkipCounters) -> None:
        """TensorBoard scalars of the loss scale and the skipped steps, also kept in the graph's collections."""
        skipped = read_counter(counters.skipped_steps)
        tf.compat.v1.summary.scalar("loss_scale", loss_scale)
        tf.compat.v1.summary.scalar("skipped_steps", skipped)
        tf.compat.v1.add_to_collection(LOSS_SCALE_COLLECTION, loss_scale)
        tf.compat.v1.add_to_collection(SKIPPED_STEPS_COLLECTION, skipped)

    def compute_gradients(
        self,
        loss: Union[tf.Tensor, Callable[[], tf.Tensor]],
        var_list: Optional[Sequence[tf.Variable]] = None,
        gate_gradients: int = tf.compat.v1.train.Optimizer.GATE_OP,
        aggregation_method: Optional[int] = None,
        colocate_gradients_with_ops: bool = False,
        grad_loss: Optional[tf.Tensor] = None,
    ) -> GradsAndVars:
        """Differentiate the scaled loss with the wrapped optimizer; return unscaled (gradient, variable) pairs.

        With a manager that does not skip steps (``NoLossScaling``, scale 1) the loss is differentiated as is.
        Either way, gradient terms computed from a variable alone (weight decay) are scheduled just
        before the sum that needs them (``gradient_order``): the same values, a lower memory peak.

        A callable ``loss`` is called once (graph mode), as contrib does. The scale tensor used is
        kept in ``gradients_loss_scale`` (diagnosis tools feed it back to replay a step).
        """
        if callable(loss):
            loss = loss()
        loss_scale = self._manager.get_loss_scale()
        self.gradients_loss_scale = loss_scale
        if not self._manager.skips_nonfinite_steps:
            grads_and_vars = self._optimizer.compute_gradients(
                loss, var_list=var_list, gate_gradients=gate_gradients, aggregation_method=aggregation_method,
                colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss,
            )
            defer_variable_terms([g for g, _ in grads_and_vars])
            return grads_and_vars
        scaled_loss = scale_loss(loss, loss_scale)
        if grad_loss is not None:
            grad_loss = tf.convert_to_tensor(grad_loss)
            grad_loss = tf.cast(grad_loss, _wide_dtype(grad_loss.dtype))
        grads_and_vars = self._optimizer.compute_gradients(
            scaled_loss,
            var_list=var_list,
            gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops,
            grad_loss=grad_loss,
        )
        defer_variable_terms([g for g, _ in grads_and_vars])
        with tf.name_scope("unscale_gradients"):
            return [
                (None if g is None else unscale_gradient(g, loss_scale), v) for g, v in grads_and_vars
            ]

    def apply_gradients(
        self,
        grads_and_vars: Sequence[Tuple[Optional[Gradient], tf.Variable]],
        global_step: Optional[tf.Variable] = None,
        name: Optional[str] = None,
    ) -> tf.Operation:
        """Apply unscaled gradients if all are finite; always update the manager, counters and guard.

        With a manager that does not skip steps (``NoLossScaling``) the wrapped optimizer applies them directly.
        Either way its slots start on buffers of their own (``slot_init``): the same values, fewer bytes kept.
        """
        grads_and_vars = list(grads_and_vars)
        present = [(g, v) for g, v in grads_and_vars if g is not None]
        if not present:
            raise ValueError(
                "grads_and_vars has no gradient for any variable; make the loss depend on the variables to train."
            )
        if not self._manager.skips_nonfinite_steps:
            with tf.name_scope(self.get_name()):
                self._summarize(self._manager.get_loss_scale(), self._counters())
            with unfolded_slot_initializers():
                return self._optimizer.apply_gradients(grads_and_vars, global_step, name)
        _require_resource_variables([v for _, v in present] + ([global_step] if global_step is not None else []))
        with tf.name_scope(self.get_name()):
            counters = self._counters()
            finite = finite_flags([g for g, _ in present])
            all_finite = tf.reduce_all(finite, name="all_finite")
            at_min = self._manager.at_min_loss_scale()
            loss_scale = self._manager.get_loss_scale()
            self._summarize(loss_scale, counters)
            record, streak = record_step(counters, all_finite, at_min)
            with tf.control_dependencies([at_min, loss_scale]):
                update_scale = self._manager.update_loss_scale(all_finite)
            bookkeeping = [update_scale, record]
            if self._skip_limit is not None:
                bookkeeping.append(divergence_guard(streak, self._skip_limit, present, finite, loss_scale))

        def skip() -> tf.Operation:
            if self._count_skipped_steps and global_step is not None:
                return tf.group(tf.compat.v1.assign_add(global_step, 1))
            return tf.no_op()

        with unfolded_slot_initializers():
            apply_if_finite = tf.cond(
                all_finite,
                lambda: tf.group(self._optimizer.apply_gradients(grads_and_vars, global_step, name)),
                skip,
            )
        return tf.group(apply_if_finite, *bookkeeping)

    def get_slot(self, var: tf.Variable, name: str) -> Optional[tf.Variable]:
        """Return the wrapped optimizer's slot ``name`` for ``var``."""
        return self._optimizer.get_slot(var, name)

    def get_slot_names(self) -> List[str]:
        """Return the wrapped optimizer's slot names."""
        return self._optimizer.get_slot_names()

    def variables(self) -> List[tf.Variable]:
        """Return the wrapped optimizer's variables, the manager's state and this graph's skip counters."""
        counters = self._counters()
        return (
            self._optimizer.variables()
            + self._manager.variables()
            + [counters.skipped_steps, counters.skips_in_a_row_at_min]
        )
