"""``enable_mixed_precision``: the one-call setup — graph pass plus loss scaling around an optimizer."""

from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import tensorflow as tf

from slim_mp.loss_scale.managers import LossScaleManager
from slim_mp.loss_scale.optimizer import LossScaleOptimizer
from slim_mp.loss_scale.policy import LossScaleLike, make_loss_scale_manager
from slim_mp.precision import PrecisionLike, resolve_precision
from slim_mp.graph_pass.report import RewriteReport
from slim_mp.graph_pass.rewrite import rewrite


class MixedPrecisionOptimizer(LossScaleOptimizer):
    """A ``LossScaleOptimizer`` that first rewrites the graph computing each loss it differentiates.

    The rewrite runs once per loss tensor; its reports are kept in ``rewrite_reports``. Several
    losses that share a graph (model clones) are best rewritten together with ``rewrite_losses``
    before their gradients are taken: one pass, one report, and no clone rewritten after another's
    backward pass exists.
    """

    def __init__(self, opt: tf.compat.v1.train.Optimizer, loss_scale_manager: LossScaleManager,
                 precision: tf.DType, rewrite_options: Dict[str, Any],
                 max_consecutive_skips_at_min: Optional[int] = 100, count_skipped_steps: bool = False) -> None:
        super().__init__(opt, loss_scale_manager, max_consecutive_skips_at_min,
                         count_skipped_steps=count_skipped_steps)
        self.precision = precision
        self._rewrite_options = rewrite_options
        self._rewritten: Set[Tuple[tf.Graph, str]] = set()
        self.rewrite_reports: list = []

    def rewrite_losses(self, losses: Sequence[tf.Tensor]) -> List[tf.Tensor]:
        """Rewrite, in one pass, the graph computing those ``losses`` not yet rewritten; return them remapped."""
        pending = [loss for loss in losses if (loss.graph, loss.name) not in self._rewritten]
        if not pending:
            return list(losses)
        report: RewriteReport = rewrite(pending, self.precision, **self._rewrite_options)
        self.rewrite_reports.append(report)
        remapped = [report.remap(loss) for loss in losses]
        self._rewritten.update((loss.graph, loss.name) for loss in remapped)
        return remapped

    def compute_gradients(self, loss, *args, **kwargs):
        if callable(loss):
            loss = loss()
        (loss,) = self.rewrite_losses([loss])
        return super().compute_gradients(loss, *args, **kwargs)


def enable_mixed_precision(
    optimizer: tf.compat.v1.train.Optimizer,
    precision: PrecisionLike = "float16",
    loss_scale: LossScaleLike = None,
    max_consecutive_skips_at_min: Optional[int] = 100,
    count_skipped_steps: bool = False,
    placement: Optional[str] = None,
    **rewrite_options: Any,
) -> MixedPrecisionOptimizer:
    """Wrap ``optimizer`` for mixed-precision training; the graph is rewritten when gradients are computed.

    ``rewrite_options`` go to ``slim_mp.rewrite`` (``keep_fp32_scopes``, ``deny``, ...), and so does
    ``placement``: ``"measured"`` (the default) keeps float32 the ops measured slower in low precision
    on this device, ``"static"`` converts every allow-list op.
    ``count_skipped_steps=True`` is for ``SyncReplicasOptimizer`` (see ``LossScaleOptimizer``).

    Example::

        loss = tf.compat.v1.losses.get_total_loss()
        optimizer = slim_mp.enable_mixed_precision(
            tf.compat.v1.train.MomentumOptimizer(0.01, 0.9), precision="float16")
        train_op = slim.learning.create_train_op(loss, optimizer)   # rewrite + scaled gradients
        print(optimizer.rewrite_reports[0].summary())
    """
    dtype = resolve_precision(precision)
    manager = make_loss_scale_manager(loss_scale, dtype)
    return MixedPrecisionOptimizer(
        optimizer, manager, dtype, dict(rewrite_options, placement=placement), max_consecutive_skips_at_min,
        count_skipped_steps,
    )
