"""The graph pass: rewrite a built ``tf.Graph`` so conv/matmul-class ops run in float16 or bfloat16.

``rewrite_options`` checks every option of the pass into one ``RewriteOptions`` value. Then one module per
pipeline step, in the order ``rewrite`` (the pipeline) runs them: ``region`` (which ops compute the fetches),
``op_classes`` and ``op_ports`` (op-type knowledge, plain data), ``placement`` (a package: which allow ops pay
in low precision where the step runs, measured and cached), ``paint`` (which ops go low), ``conversions`` (the
casts and folded constants a painting implies), ``refine`` (cast-saving demotions), ``rebuild`` (re-create the
low ops and their casts, with ``weight_casts`` ordering each weight's cast next to the layer that reads it,
forward and backward, and ``gradient_kernels`` computing each gradient of a low op by the kernel the placement
chose: low, float32 or, for a pointwise filter, a matrix product), and ``report`` (what was done and why). It
imports nothing from loss scaling, training, distribution or measurement. The names other packages use are
exported here; code outside ``graph_pass`` imports them from ``slim_mp.graph_pass``.
"""

from slim_mp.graph_pass.op_classes import (BFLOAT16_CLASSES, FLOAT16_CLASSES, VARIABLE_OP_TYPES, OpClasses,
                                           check_op_type, fuses_into)
from slim_mp.graph_pass.op_ports import op_def_allows
from slim_mp.graph_pass.placement import (DECISIONS_FILE_NAME, MeasuringTarget, NoiseRule, PlacementOptions,
                                          PlacementPlan, default_placement, resolve_placement, timing_cache_dir)
from slim_mp.graph_pass.region import in_scopes, select_region
from slim_mp.graph_pass.report import RewriteReport
from slim_mp.graph_pass.rewrite import RewritePlan, plan_rewrite, rewrite
from slim_mp.graph_pass.rewrite_options import RewriteOptions, rewrite_options_from

__all__ = [
    "BFLOAT16_CLASSES", "FLOAT16_CLASSES", "VARIABLE_OP_TYPES", "OpClasses", "check_op_type", "fuses_into",
    "op_def_allows", "DECISIONS_FILE_NAME",
    "MeasuringTarget", "NoiseRule", "PlacementOptions", "PlacementPlan", "default_placement", "resolve_placement",
    "timing_cache_dir", "in_scopes",
    "select_region", "RewriteReport", "RewritePlan",
    "plan_rewrite", "rewrite", "RewriteOptions", "rewrite_options_from",
]
