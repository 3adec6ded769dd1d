"""Loss scaling, a drop-in for ``tf.contrib.mixed_precision``: managers, the optimizer, finite checks, skip counts.

In the order a step's gradients meet them: ``policy`` (what ``"dynamic"`` means; one factory from a
request to a manager), ``managers`` (where the scale comes from and how it reacts to overflow),
``optimizer`` (``LossScaleOptimizer``: scale the loss, unscale the gradients, apply or skip),
``gradient_order`` (weight-decay terms computed just before the sum that needs them, not held),
``finite_check`` (whether the gradients hold inf or NaN), ``skip_monitor`` (count skipped steps,
stop a run that only skips), ``slot_init`` (the wrapped optimizer's slots start on buffers of
their own, not on a constant the session keeps), and ``divergence`` (the in-graph checks that stop
a diverged run, read back as ``TrainingDivergedError``).

It imports nothing from the graph pass, training, distribution or measurement. The names other
packages use are exported here; code outside ``loss_scale`` imports them from ``slim_mp.loss_scale``.
"""

from slim_mp.loss_scale.divergence import (LOSS_CHECK, LOSS_SCALE_GUARD, NONFINITE_LOSS, NONFINITE_SUMMARY, Divergence,
                                           TrainingDivergedError, loss_check, read_divergence, with_diagnosis)
from slim_mp.loss_scale.finite_check import Gradient, GradsAndVars, beside, gradient_values
from slim_mp.loss_scale.managers import (LOSS_SCALE_STATE_NAMES, ExponentialUpdateLossScaleManager,
                                         FixedLossScaleManager, LossScaleManager, NoLossScaling)
from slim_mp.loss_scale.optimizer import LOSS_SCALE_COLLECTION, SKIPPED_STEPS_COLLECTION, LossScaleOptimizer
from slim_mp.loss_scale.policy import (DYNAMIC, DynamicLossScale, LossScaleLike, from_tensorflow_loss_scale,
                                       make_loss_scale_manager, parse_loss_scale)
from slim_mp.loss_scale.slot_init import unfolded_slot_initializers

__all__ = [
    "beside",
    "LOSS_CHECK", "LOSS_SCALE_GUARD", "NONFINITE_LOSS", "NONFINITE_SUMMARY", "Divergence", "TrainingDivergedError",
    "loss_check", "read_divergence", "with_diagnosis", "LOSS_SCALE_STATE_NAMES", "ExponentialUpdateLossScaleManager",
    "FixedLossScaleManager", "LossScaleManager", "NoLossScaling", "Gradient", "GradsAndVars", "gradient_values",
    "LossScaleOptimizer", "LOSS_SCALE_COLLECTION", "SKIPPED_STEPS_COLLECTION", "DYNAMIC", "DynamicLossScale",
    "LossScaleLike", "from_tensorflow_loss_scale", "make_loss_scale_manager", "parse_loss_scale",
    "unfolded_slot_initializers",
]
