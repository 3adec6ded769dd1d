"""``enable_mixed_precision``: the one-call setup — graph pass plus loss scaling around an optimizer.

``enable_mixed_precision_graph_rewrite`` is the same behind TensorFlow's own AMP entry point's
signature, for code written against ``tf.compat.v1.mixed_precision``.
"""

from typing import Any, List, Optional, Sequence, Set, Tuple

import tensorflow as tf

from slim_mp.loss_scale import (FixedLossScaleManager, LossScaleLike, LossScaleManager, LossScaleOptimizer,
                                from_tensorflow_loss_scale, gradient_values, make_loss_scale_manager)
from slim_mp.precision import PrecisionLike, resolve_precision
from slim_mp.graph_pass import RewriteOptions, RewriteReport, rewrite, rewrite_options_from
from slim_mp.numerics import NonfiniteProbe, unwatched_probes_warning


class MixedPrecisionOptimizer(LossScaleOptimizer):
    """A ``LossScaleOptimizer`` that first rewrites the graph computing each loss it differentiates.

    The rewrite runs once per loss tensor; its reports are kept in ``rewrite_reports``. Several
    losses that share a graph (model clones) are best rewritten together with ``rewrite_losses``
    before their gradients are taken: one pass, one report, and no clone rewritten after another's
    backward pass exists. Build it with ``enable_mixed_precision``, which resolves the precision and
    the loss-scale request.
    """

    def __init__(self, opt: tf.compat.v1.train.Optimizer, loss_scale_manager: LossScaleManager,
                 precision: tf.DType, rewrite_options: RewriteOptions,
                 max_consecutive_skips_at_min: Optional[int] = 100, count_skipped_steps: bool = False,
                 debug_nonfinite: bool = False) -> None:
        """Wrap ``opt``; nothing is rewritten until gradients are computed.

        Args:
          opt: the ``tf.compat.v1.train.Optimizer`` that applies the updates.
          loss_scale_manager: supplies and updates the loss scale.
          precision: ``tf.float16`` or ``tf.bfloat16``, the dtype the graph pass converts to.
          rewrite_options: the graph pass's ``RewriteOptions``, used for every loss rewritten.
          max_consecutive_skips_at_min: skipped steps in a row at the minimum scale before the train
            op fails (see ``LossScaleOptimizer``); None disables the guard.
          count_skipped_steps: advance ``global_step`` on skipped steps too (for ``SyncReplicasOptimizer``).
          debug_nonfinite: build a ``NonfiniteProbe`` per gradient computation (``nonfinite_probes``).

        Raises:
          TypeError: if ``opt`` is not a ``tf.compat.v1.train.Optimizer``, ``loss_scale_manager``
            not a ``LossScaleManager`` or ``rewrite_options`` not a ``RewriteOptions``.
          ValueError: if ``max_consecutive_skips_at_min`` is neither None nor a positive integer.
        """
        super().__init__(opt, loss_scale_manager, max_consecutive_skips_at_min,
                         count_skipped_steps=count_skipped_steps)
        if not isinstance(rewrite_options, RewriteOptions):
            raise TypeError(f"rewrite_options must be a slim_mp.RewriteOptions, got {type(rewrite_options).__name__}.")
        self.precision = precision
        self._rewrite_options = rewrite_options
        self._rewritten: Set[Tuple[tf.Graph, str]] = set()
        self.rewrite_reports: list = []
        self._debug_nonfinite = debug_nonfinite
        self.nonfinite_probes: List[NonfiniteProbe] = []

    def rewrite_losses(self, losses: Sequence[tf.Tensor]) -> List[tf.Tensor]:
        """Rewrite, in one pass, the graph computing those ``losses`` not yet rewritten; return them remapped."""
        pending = [loss for loss in losses if (loss.graph, loss.name) not in self._rewritten]
        if not pending:
            return list(losses)
        report: RewriteReport = rewrite(pending, self.precision, options=self._rewrite_options)
        self.rewrite_reports.append(report)
        remapped = [report.remap(loss) for loss in losses]
        self._rewritten.update((loss.graph, loss.name) for loss in remapped)
        return remapped

    def compute_gradients(self, loss, *args, **kwargs):
        if callable(loss):
            loss = loss()
        (loss,) = self.rewrite_losses([loss])
        grads_and_vars = super().compute_gradients(loss, *args, **kwargs)
        if self._debug_nonfinite:
            gradients = [gradient_values(g) for g, _ in grads_and_vars if g is not None]
            if gradients:
                self.nonfinite_probes.append(NonfiniteProbe(loss, gradients, self.gradients_loss_scale))
        return grads_and_vars

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        train_op = super().apply_gradients(grads_and_vars, global_step, name)
        if not self.nonfinite_probes:
            return train_op
        # A loop that runs no probe gets one warning at its first step, naming the seam to add.
        return tf.group(train_op, unwatched_probes_warning(tf.compat.v1.get_default_graph()))


def enable_mixed_precision(
    optimizer: tf.compat.v1.train.Optimizer,
    precision: PrecisionLike = "float16",
    loss_scale: LossScaleLike = None,
    max_consecutive_skips_at_min: Optional[int] = 100,
    count_skipped_steps: bool = False,
    debug_nonfinite: bool = False,
    placement: Optional[str] = None,
    *,
    options: Optional[RewriteOptions] = None,
    **option_keywords: Any,
) -> MixedPrecisionOptimizer:
    """Wrap ``optimizer`` for mixed-precision training; the graph is rewritten when gradients are computed.

    Example::

        loss = tf.compat.v1.losses.get_total_loss()
        optimizer = slim_mp.enable_mixed_precision(
            tf.compat.v1.train.MomentumOptimizer(0.01, 0.9), precision="float16")
        train_op = slim.learning.create_train_op(loss, optimizer)   # rewrite + scaled gradients
        print(optimizer.rewrite_reports[0].summary())

    Args:
      optimizer: the ``tf.compat.v1.train.Optimizer`` that applies the updates (to float32 master weights).
      precision: ``float16`` or ``bfloat16`` (any spelling ``slim_mp.precision`` accepts, or the dtype).
      loss_scale: ``"dynamic"``, a fixed scale >= 1, a ``LossScaleManager``, or None for the
        precision's default: dynamic for float16; for bfloat16 ``NoLossScaling`` (no scaling and no
        skipped steps, as in float32; pass 1 for contrib's skipping at a fixed scale of 1).
      max_consecutive_skips_at_min: skipped steps in a row at the minimum loss scale before the
        train op fails naming the non-finite gradients; None disables the guard.
      count_skipped_steps: advance ``global_step`` on skipped steps too; needed under
        ``SyncReplicasOptimizer`` (see ``LossScaleOptimizer``).
      debug_nonfinite: also build, per gradient computation, a ``NonfiniteProbe`` (kept in
        ``optimizer.nonfinite_probes``): an extra fetch, never run by the train step, that a loop runs
        after a skipped step to name the op where inf/NaN first appeared (our training loop,
        ``slim_mp.train_step`` and ``slim_mp.TrainStepHook`` do; any other loop is warned once).
        Steps with inf/NaN gradients are then always skipped (bfloat16's default ``NoLossScaling``
        becomes a fixed scale of 1), so the replay sees the weights the failing step saw.
      placement: ``"measured"`` (the default) keeps float32 the allow ops measured slower in low
        precision on this device; ``"static"`` converts every allow-list op (see ``slim_mp.rewrite``).
      options: the graph pass's ``slim_mp.RewriteOptions``; None for the defaults.
      **option_keywords: options of ``slim_mp.rewrite`` (``keep_fp32_scopes``, ``deny``, ...: the
        fields of ``RewriteOptions``); they replace those of ``options`` and are checked here.

    Returns:
      A ``MixedPrecisionOptimizer``; after ``minimize``/``compute_gradients`` its
      ``rewrite_reports`` describe what the graph pass did.

    Raises:
      ValueError: for an unknown precision, a ``loss_scale`` that is neither ``"dynamic"`` nor a
        number >= 1, a ``max_consecutive_skips_at_min`` that is neither None nor a positive integer,
        or a bad rewrite option (an unknown op type, ...).
      TypeError: if ``optimizer`` is not a ``tf.compat.v1.train.Optimizer``, or for a keyword that
        is no rewrite option (naming it).
    """
    dtype = resolve_precision(precision)
    if placement is not None:
        option_keywords = dict(option_keywords, placement=placement)
    rewrite_options = rewrite_options_from(options, option_keywords, "enable_mixed_precision")
    manager = make_loss_scale_manager(loss_scale, dtype)
    if debug_nonfinite and not manager.skips_nonfinite_steps:
        # The diagnosis replays the failing step: its weights must not have been updated with inf/NaN.
        manager = FixedLossScaleManager(1.0)
    return MixedPrecisionOptimizer(
        optimizer, manager, dtype, rewrite_options, max_consecutive_skips_at_min,
        count_skipped_steps, debug_nonfinite,
    )


def enable_mixed_precision_graph_rewrite(
    opt: tf.compat.v1.train.Optimizer,
    loss_scale: object = "dynamic",
    *,
    precision: PrecisionLike = "float16",
    options: Optional[RewriteOptions] = None,
) -> MixedPrecisionOptimizer:
    """TensorFlow's ``tf.compat.v1.mixed_precision.enable_mixed_precision_graph_rewrite``, with slim_mp's pass.

    Code written for TensorFlow's AMP entry point switches by changing the module name::

        opt = slim_mp.enable_mixed_precision_graph_rewrite(opt, loss_scale="dynamic")
        train_op = opt.minimize(loss)

    As TensorFlow's, it returns ``opt`` wrapped for loss scaling, and the graph computing a loss is
    rewritten when the returned optimizer takes its gradients (so compute gradients with it, not
    with ``tf.gradients``). Unlike TensorFlow's, the rewrite is slim_mp's visible graph pass (its
    report in ``rewrite_reports``, float32 master weights, the default measured placement) rather
    than grappler's at run time, it works on CPUs too (``precision="bfloat16"``), and nothing global
    is switched on: only losses differentiated by the returned optimizer are rewritten.

    Args:
      opt: a ``tf.compat.v1.train.Optimizer`` (Keras optimizers are not supported).
      loss_scale: as TensorFlow documents it: ``"dynamic"`` (start at 2**15, halve on every
        overflow, double after 2000 finite steps), a number >= 1 (fixed), or a
        ``tf.compat.v1.mixed_precision.FixedLossScale``/``DynamicLossScale``; slim_mp's
        ``LossScaleManager``s are accepted too, and None gives the precision's default.
      precision: ``float16`` (TensorFlow's rewrite, for tensor-core GPUs) or ``bfloat16``.
      options: the graph pass's ``slim_mp.RewriteOptions``; None for the defaults.

    Returns:
      The wrapped optimizer, a ``MixedPrecisionOptimizer``.

    Raises:
      ValueError: as TensorFlow's, when ``opt`` is not a ``tf.compat.v1.train.Optimizer`` or is
        already a loss-scale optimizer; also for a ``loss_scale`` or ``precision`` it cannot use.
    """
    if isinstance(opt, LossScaleOptimizer):
        raise ValueError("opt is already a slim_mp LossScaleOptimizer; pass the optimizer it wraps: "
                         "enable_mixed_precision_graph_rewrite wraps it itself.")
    if not isinstance(opt, tf.compat.v1.train.Optimizer):
        raise ValueError(f"opt must be a tf.compat.v1.train.Optimizer, got {type(opt).__name__}; "
                         "wrap e.g. tf.compat.v1.train.MomentumOptimizer(0.01, 0.9).")
    return enable_mixed_precision(opt, precision, from_tensorflow_loss_scale(loss_scale), options=options)
