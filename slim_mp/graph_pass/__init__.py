"""The graph pass: rewrite a built ``tf.Graph`` so conv/matmul-class ops run in float16 or bfloat16.

The pass in seven steps: the one numbered description, which the README, ``rewrite``, ``paint`` and
docs/placement.md cite by number. ``rewrite_options`` first checks every option into one
``RewriteOptions`` value; then, one module (or package) per step:

1. Select (``region``): the ops that compute the fetches, plus what the graph's ``UPDATE_OPS`` compute.
2. Classify (``op_classes``, with ``op_ports``; plain data): each op type is allow (always low), infer
   (low when fed low), clear (follows its neighbours) or deny (float32, and tainting the infer ops
   after it); float16 and bfloat16 have their own tables.
3. Place (``placement``, a package): which allow ops pay in low precision where the step runs, measured
   and cached (every one with ``placement='static'``), and the kernel of each of their gradients.
4. Paint (``paint``, in four phases): low or float32 per op, to a fixpoint.
5. Refine (``refine``; ``conversions`` plans the casts of a painting): the tail after the last allow op
   runs float32 where that needs fewer casts; what grappler fuses into a layer stays with it.
6. Rebuild (``rebuild``): each low op re-created in the low type, its consumers re-routed, one cast per
   (tensor, type); ``weight_casts`` orders each weight's cast next to the layer that reads it, forward
   and backward, and ``gradient_kernels`` computes each gradient of a low op by the placement's kernel;
   ``wire_side`` makes a cast of a variable on another task (a parameter server) on the variable's
   device, with its gradient, so the low copy crosses the wire, not the float32 value.
7. Report (``report``): what was done and why.

``plan_rewrite`` takes steps 1-5 without touching the graph; ``rewrite`` all seven. The package imports
nothing from loss scaling, training, distribution or measurement. The names other packages use are
exported here; code outside ``graph_pass`` imports them from ``slim_mp.graph_pass``.
"""

from slim_mp.graph_pass.op_classes import (BFLOAT16_CLASSES, FLOAT16_CLASSES, VARIABLE_OP_TYPES, OpClasses,
                                           check_op_type, fuses_into)
from slim_mp.graph_pass.op_ports import op_def_allows
from slim_mp.graph_pass.placement import (DECISIONS_FILE_NAME, MeasuringTarget, NoiseRule, Placement, PlacementFiles,
                                          PlacementMeasuring, PlacementOptions, PlacementPlan, PlacementTuning,
                                          default_placement, resolve_placement, timing_cache_dir)
from slim_mp.graph_pass.region import in_scopes, select_region
from slim_mp.graph_pass.report import RewriteReport
from slim_mp.graph_pass.rewrite import RewritePlan, plan_rewrite, rewrite
from slim_mp.graph_pass.rewrite_options import RewriteOptions, rewrite_options_from

__all__ = [
    "BFLOAT16_CLASSES", "FLOAT16_CLASSES", "VARIABLE_OP_TYPES", "OpClasses", "check_op_type", "fuses_into",
    "op_def_allows", "DECISIONS_FILE_NAME",
    "MeasuringTarget", "NoiseRule", "Placement", "PlacementFiles", "PlacementMeasuring", "PlacementOptions",
    "PlacementPlan", "PlacementTuning", "default_placement", "resolve_placement",
    "timing_cache_dir", "in_scopes",
    "select_region", "RewriteReport", "RewritePlan",
    "plan_rewrite", "rewrite", "RewriteOptions", "rewrite_options_from",
]
