"""``slim_mp.rewrite``: run a built TF-Slim graph in float16 or bfloat16, without editing the network.

``plan_rewrite`` takes steps 1-5 (select, classify, place, paint, refine) of the pass, as ``slim_mp.graph_pass``
numbers them, without touching the graph; ``rewrite`` then takes step 6 (rebuild) and step 7 (report).
"""

import collections
import dataclasses
import time
import warnings
from typing import Any, Dict, Iterable, List, Optional

import tensorflow as tf

from slim_mp.config_fields import ArgumentText, argument
from slim_mp.devices import device_type as detected_device_type
from slim_mp.devices import emulation_warning
from slim_mp.graph_pass.conversions import planned_conversions
from slim_mp.graph_pass.gradient_kernels import GradientKernels
from slim_mp.graph_pass.op_classes import default_classes
from slim_mp.graph_pass.paint import LOW, Decision, PaintConfig, class_counts
from slim_mp.graph_pass.op_ports import OpPorts
from slim_mp.graph_pass.placement import (Placement, PlacementOptions, PlacementPlan, emulated_placement,
                                          measured_placement, resolve_placement)
from slim_mp.graph_pass.rebuild import Rebuilder, rebuild_low_precision
from slim_mp.graph_pass.refine import painted_low_ops
from slim_mp.graph_pass.region import Region, select_region
from slim_mp.graph_pass.report import RewriteReport, group_float32_ops
from slim_mp.graph_pass.rewrite_options import RewriteOptions, rewrite_options_from
from slim_mp.graph_pass.wire_side import keep_variable_side_gradients
from slim_mp.precision import PrecisionLike, resolve_precision

_QUIET_REASONS = ("no low-precision neighbour", "existing float cast")


def _check_before_gradients(low: Iterable[tf.Operation]) -> None:
    for op in low:
        for tensor in op.outputs:
            for consumer in tensor.consumers():
                if consumer.name.split("/")[0].startswith("gradients"):
                    raise ValueError(
                        f"rewrite() must run before gradients are taken, but {consumer.name!r} already "
                        f"differentiates {op.name!r}; call slim_mp.rewrite(loss) before "
                        "tf.gradients/optimizer.minimize (or use slim_mp.enable_mixed_precision)."
                    )


@dataclasses.dataclass(frozen=True)
class RewritePlan:
    """What the pass decided (steps 1-5), before anything is rebuilt: the region, each op's decision, the ops
    going low, the placement's plan and the kernels of their gradients, and ``emulated``: why the device only
    emulates the precision ("" where it is native)."""

    dtype: tf.DType
    device_type: str
    region: Region
    decisions: Dict[tf.Operation, Decision]
    low_ops: List[tf.Operation]
    placement: Optional[PlacementPlan]
    gradient_kernels: GradientKernels = GradientKernels()
    emulated: str = ""

    def ports(self) -> Dict[tf.Operation, OpPorts]:
        """Each decided op's data ports, as the rebuild and the cast planning take them."""
        return {op: decision.ports for op, decision in self.decisions.items()}


def plan_rewrite(fetches: Any, precision: PrecisionLike = "float16",
                 options: Optional[RewriteOptions] = None) -> RewritePlan:
    """Decide, without touching the graph, which ops ``rewrite`` (same options) would run in low precision.

    Unlike ``rewrite`` it also works on a graph that already holds gradients (tools such as the
    numerics audit inspect the float32 training graph).

    Args:
      fetches: as for ``rewrite``.
      precision: as for ``rewrite``.
      options: the pass's ``RewriteOptions``; None for the defaults.

    Raises:
      ValueError: for an unknown precision or empty fetches.
    """
    dtype = resolve_precision(precision)
    options = options if options is not None else RewriteOptions()
    region = _selected(fetches, options)
    classes = default_classes(dtype).with_overrides(options.class_overrides(), remove=options.remove)
    # Where the step will run: the painting and every timing take their device from it.
    placement_options = (options.placement_options or PlacementOptions()).placed(region.ops)
    device = options.device_type or placement_options.measuring.target.device_type() or detected_device_type()
    config = PaintConfig(dtype, classes, list(options.keep_fp32_scopes), device)
    emulated = emulation_warning(dtype.name, device)
    placement = _placement(fetches, region, config, Placement(resolve_placement(options.placement)),
                           placement_options, emulated)
    decisions, low = painted_low_ops(region, placement.applied(config) if placement is not None else config)
    kernels = placement.gradient_kernels if placement is not None else GradientKernels()
    return RewritePlan(dtype, device, region, decisions, low, placement, kernels, emulated)


def _selected(fetches: Any, options: RewriteOptions) -> Region:
    """Step 1: the ops computing ``fetches``, and what the graph's ``UPDATE_OPS`` compute unless left out."""
    region = select_region(fetches)
    update_ops = region.graph.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    if options.include_update_ops and update_ops:
        region = select_region([fetches, update_ops])
    return region


def _placement(fetches: Any, region: Region, config: PaintConfig, placement: Placement,
               placement_options: PlacementOptions, emulated: str) -> Optional[PlacementPlan]:
    """Step 3: the measured placement's plan, the static painting's where the device only emulates the
    precision (``emulated``); None for the static placement."""
    if placement is not Placement.MEASURED:
        return None
    if emulated:
        return emulated_placement(emulated)
    objectives = [t for t in tf.nest.flatten(fetches, expand_composites=True)
                  if isinstance(t, tf.Tensor) and t.dtype.is_floating]
    return measured_placement(region, config, placement_options, objectives)


def rewrite(
    fetches: Any,
    precision: PrecisionLike = "float16",
    *,
    dry_run: bool = False,
    options: Optional[RewriteOptions] = None,
    **option_keywords: Any,
) -> RewriteReport:
    """Rewrite, in place, the part of the graph that computes ``fetches`` to run in low precision.

    Call it on the loss (or logits) before ``tf.gradients`` / ``optimizer.minimize``: the backward
    pass then inherits the low precision. Variables stay float32 (master weights); their reads are
    cast once. The graph's ``UPDATE_OPS`` (batch-norm moving averages) run with every train step, so
    what they compute is rewritten too unless ``include_update_ops=False``.

    Example::

        logits, end_points = resnet_v1.resnet_v1_50(images, 1000)
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
        report = slim_mp.rewrite(loss, "bfloat16", keep_fp32_scopes=["resnet_v1_50/logits"])
        print(report.summary())
        end_points = report.remap(end_points)
        train_op = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss)

    Args:
      fetches: the tensors or operations to compute (nested lists/dicts allowed), all of one graph;
        usually the loss.
      precision: the low precision, ``float16`` or ``bfloat16`` (any spelling ``slim_mp.precision``
        accepts, or the ``tf.DType``).
      dry_run: only plan: return the report of what would change and leave the graph untouched.
      options: a ``slim_mp.RewriteOptions`` holding the pass's options; None for the defaults.
      **option_keywords: the fields of ``RewriteOptions`` (each explained there: ``allow``, ``infer``,
        ``clear``, ``deny``, ``remove``, ``keep_fp32_scopes``, ``device_type``, ``include_update_ops``,
        ``placement``, ``placement_options``), which replace those of ``options``.

    Returns:
      A ``RewriteReport``: ops considered and converted, casts inserted (or planned), the float32
      ops with their reasons, unlisted op types, warnings, and ``remap`` to map tensors taken
      before the rewrite (e.g. ``end_points``) to their rewritten counterparts.

    Raises:
      ValueError: for an unknown precision, ``device_type``, placement or TensorFlow op type, an op
        type given to two lists (or both added and removed), no fetches or fetches from different
        graphs, or fetches whose gradients were already taken.
      TypeError: for a keyword that is no rewrite option (naming it), or a fetch that is neither a
        tensor nor an operation.
    """
    started = time.perf_counter()
    plan = plan_rewrite(fetches, precision, rewrite_options_from(options, option_keywords, "rewrite"))
    _check_before_gradients(plan.low_ops)
    rebuilder = None if dry_run else rebuild_low_precision(plan.region.graph, plan.low_ops, plan.ports(),
                                                           plan.dtype, plan.gradient_kernels)
    if rebuilder is not None:
        keep_variable_side_gradients(plan.region.ops)
    notes = _notes(plan, rebuilder)
    for note in notes:
        warnings.warn(str(ArgumentText(note)), stacklevel=2)
    return _report(plan, rebuilder, notes, started)


def _notes(plan: RewritePlan, rebuilder: Optional[Rebuilder]) -> List[str]:
    """The warnings of a rewrite: an emulated precision, the rebuild's (a constant that overflows), and why
    nothing was converted when nothing was (the arguments they name marked: ``config_fields.argument``)."""
    notes = [plan.emulated] if plan.emulated else []
    notes.extend(rebuilder.warnings if rebuilder is not None else [])
    dtype = plan.dtype.name
    already = any(t.dtype == plan.dtype for op in plan.region.ops for t in op.outputs)
    if plan.low_ops or already:
        return notes
    force = f"{argument('placement')}=static converts them anyway."
    if plan.placement is not None and plan.placement.float32_ops and not plan.placement.timed:
        notes.append(f"nothing was converted to {dtype}: the measured placement's {plan.placement.source}; {force}")
    elif plan.placement is not None and plan.placement.float32_ops:
        notes.append(f"nothing was converted to {dtype}: the measured placement kept every allow op float32, "
                     f"{dtype} does not pay on this device for these shapes (see the float32 reasons); {force}")
    else:
        notes.append(f"nothing was converted to {dtype}: no allow-list op (Conv2D, MatMul, ...) computes "
                     "the fetches, or all were kept float32 (see the float32 reasons).")
    return notes


def _report(plan: RewritePlan, rebuilder: Optional[Rebuilder], notes: List[str], started: float) -> RewriteReport:
    """Step 7: the report of ``plan``, rebuilt by ``rebuilder`` (None: a dry run, its casts only planned)."""
    decisions = plan.decisions
    conversions = (rebuilder.conversions if rebuilder is not None
                   else planned_conversions(plan.low_ops, plan.ports(), plan.dtype))
    unlisted = collections.Counter(op.type for op, d in decisions.items() if d.op_class == "unlisted")
    float32_entries = [(op.name, d.reason) for op, d in decisions.items()
                       if d.colour != LOW and not d.reason.startswith(_QUIET_REASONS)]
    return RewriteReport(
        precision=plan.dtype.name, device_type=plan.device_type, dry_run=rebuilder is None,
        ops_considered=len(decisions), ops_converted=len(plan.low_ops), class_counts=class_counts(decisions),
        conversions=conversions, float32_ops=group_float32_ops(float32_entries), unlisted_op_types=dict(unlisted),
        warnings=notes, seconds=time.perf_counter() - started, placement=plan.placement,
        _remap=rebuilder.remap if rebuilder is not None else None,
    )
