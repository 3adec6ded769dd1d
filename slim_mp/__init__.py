"""slim_mp: mixed-precision (float16 / bfloat16) training for TF-Slim graphs.

Importing the package makes tf_slim 1.1.0 work under TensorFlow 2.21 (``compat``). The rest, in the
order a training run's data flows through it:

* rank 0, plain knowledge: ``precision`` (the precision a user asks for), ``devices`` (where ops run
  and what they compute natively), ``op_families`` (the op a user built, from the kernel that ran),
  ``config_fields`` (config fields that carry their flag help), ``json_files`` (JSON written whole),
  ``markdown_table`` (the one way reports write tables), ``timing`` (the one clock: interleaved rounds,
  their noise, paired ratios);
* ``datasets`` (the batches), ``train_dir`` (the folder a run writes: its lock, atomic checkpoints, the
  one survey of its checkpoints), ``graph_pass`` (the built graph rewritten to low precision),
  ``loss_scale`` (the gradients scaled and checked), ``numerics`` (value ranges, the first inf/NaN,
  per-layer drift), ``mixed_precision`` (graph pass plus loss scaling in one call);
* ``distribute`` (clones and clusters), ``seams`` (the safety pieces any training loop takes),
  ``training`` (our training application), ``export`` (a checkpoint to a servable model), and
  ``measure`` (benchmarks, profiles and parity runs over all of it).
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
from slim_mp.train_dir import set_aside_damaged_checkpoints  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "rewrite", "RewriteOptions", "RewriteReport", "OpClasses", "FLOAT16_CLASSES", "BFLOAT16_CLASSES",
    "LossScaleManager", "FixedLossScaleManager", "ExponentialUpdateLossScaleManager", "NoLossScaling",
    "LossScaleOptimizer", "MixedPrecisionOptimizer", "enable_mixed_precision", "enable_mixed_precision_graph_rewrite",
    "audit", "AuditResult", "layer_diff", "LayerDiff", "TrainingDivergedError", "train_step", "TrainStepHook",
    "reporting_divergence", "set_aside_damaged_checkpoints",
]
