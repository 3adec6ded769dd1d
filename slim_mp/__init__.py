"""slim_mp: mixed-precision (float16 / bfloat16) training for TF-Slim graphs.

Importing the package makes tf_slim 1.1.0 work under TensorFlow 2.21
(see ``slim_mp.compat``).
"""

from slim_mp import compat as _compat
_compat.install()

from slim_mp.loss_scale import (  # noqa: E402
    ExponentialUpdateLossScaleManager, FixedLossScaleManager, LossScaleManager, LossScaleOptimizer, NoLossScaling,
    TrainingDivergedError,
)
from slim_mp.mixed_precision import (  # noqa: E402
    MixedPrecisionOptimizer, enable_mixed_precision, enable_mixed_precision_graph_rewrite,
)
from slim_mp.graph_pass import (  # noqa: E402
    BFLOAT16_CLASSES, FLOAT16_CLASSES, OpClasses, RewriteOptions, RewriteReport, rewrite,
)
from slim_mp.numerics import AuditResult, LayerDiff, audit, layer_diff  # noqa: E402
from slim_mp.seams import TrainStepHook, reporting_divergence, train_step  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "rewrite", "RewriteOptions", "RewriteReport", "OpClasses", "FLOAT16_CLASSES", "BFLOAT16_CLASSES",
    "LossScaleManager", "FixedLossScaleManager", "ExponentialUpdateLossScaleManager", "NoLossScaling",
    "LossScaleOptimizer", "MixedPrecisionOptimizer", "enable_mixed_precision", "enable_mixed_precision_graph_rewrite",
    "audit", "AuditResult", "layer_diff", "LayerDiff", "TrainingDivergedError", "train_step", "TrainStepHook",
    "reporting_divergence",
]
