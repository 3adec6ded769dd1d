"""Loss scaling, a drop-in for ``tf.contrib.mixed_precision``: managers, the optimizer, finite checks, skip counts.

It imports nothing from the graph pass, training, distribution or measurement.
"""

from slim_mp.loss_scale.divergence import (LOSS_CHECK, LOSS_SCALE_GUARD, Divergence, TrainingDivergedError, loss_check,
                                           read_divergence, with_diagnosis)
from slim_mp.loss_scale.managers import (LOSS_SCALE_STATE_NAMES, ExponentialUpdateLossScaleManager,
                                         FixedLossScaleManager, LossScaleManager, NoLossScaling)

__all__ = [
    "LOSS_CHECK", "LOSS_SCALE_GUARD", "Divergence", "TrainingDivergedError", "loss_check", "read_divergence",
    "with_diagnosis", "LOSS_SCALE_STATE_NAMES", "ExponentialUpdateLossScaleManager", "FixedLossScaleManager",
    "LossScaleManager", "NoLossScaling",
]
