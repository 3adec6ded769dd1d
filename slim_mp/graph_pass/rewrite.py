"""``slim_mp.rewrite``: run a built TF-Slim graph in float16 or bfloat16, without editing the network.

The pipeline, one module per step: ``rewrite_options`` (the checked options) -> ``region`` (the ops
computing the fetches) -> ``op_classes`` (allow/infer/clear/deny tables) -> ``placement`` (which
allow ops pay in low precision where the step runs) -> ``paint`` (low or float32 per op) ->
``refine`` (move the tail's casts to where they are fewest) -> ``rebuild`` (new ops, shared casts,
consumers re-routed) -> ``report``.
"""

import collections
import dataclasses
import time
import warnings
from typing import Any, Dict, Iterable, List, Optional

import tensorflow as tf

from slim_mp.devices import device_type as detected_device_type
from slim_mp.devices import emulation_warning
from slim_mp.graph_pass.conversions import planned_conversions
from slim_mp.graph_pass.gradient_kernels import GradientKernels
from slim_mp.graph_pass.op_classes import default_classes
from slim_mp.graph_pass.paint import LOW, Decision, PaintConfig, class_counts
from slim_mp.graph_pass.placement import (PlacementOptions, PlacementPlan, emulated_placement, measured_placement,
                                          resolve_placement)
from slim_mp.graph_pass.rebuild import rebuild_low_precision
from slim_mp.graph_pass.refine import painted_low_ops
from slim_mp.graph_pass.region import Region, select_region
from slim_mp.graph_pass.report import RewriteReport, group_float32_ops
from slim_mp.graph_pass.rewrite_options import RewriteOptions, rewrite_options_from
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
    """What the pass decided, before anything is rebuilt: the region, each op's decision, the ops going low."""

    dtype: tf.DType
    device_type: str
    region: Region
    decisions: Dict[tf.Operation, Decision]
    low_ops: List[tf.Operation]
    placement: Optional[PlacementPlan]
    gradient_kernels: GradientKernels = GradientKernels()


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
    classes = default_classes(dtype).with_overrides(options.class_overrides(), remove=options.remove)
    region = select_region(fetches)
    update_ops = region.graph.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    if options.include_update_ops and update_ops:
        region = select_region([fetches, update_ops])
    # Where the step will run: the painting and every timing take their device from it.
    placement_options = (options.placement_options or PlacementOptions()).placed(region.ops)
    device = options.device_type or placement_options.measuring.target.device_type() or detected_device_type()
    paint_config = PaintConfig(dtype, classes, list(options.keep_fp32_scopes), device)
    measured = None
    emulated = emulation_warning(dtype.name, device)
    placement = resolve_placement(options.placement)
    if placement == "measured" and emulated:
        measured = emulated_placement(emulated)
    elif placement == "measured":
        objectives = [t for t in tf.nest.flatten(fetches, expand_composites=True)
                      if isinstance(t, tf.Tensor) and t.dtype.is_floating]
        measured = measured_placement(region, paint_config, placement_options, objectives)
        paint_config = measured.applied(paint_config)
    decisions, low = painted_low_ops(region, paint_config)
    kernels = measured.gradient_kernels if measured is not None else GradientKernels()
    return RewritePlan(dtype, device, region, decisions, low, measured, kernels)


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
      options: a ``slim_mp.RewriteOptions`` holding the options below; None for the defaults.
      **option_keywords: the fields of ``RewriteOptions``, which replace those of ``options``:
        ``allow``, ``infer``, ``clear``, ``deny``, ``remove`` (op types moved between the lists),
        ``keep_fp32_scopes`` (name scopes kept float32), ``device_type`` (``CPU``/``GPU``),
        ``include_update_ops``, ``placement`` (``"measured"``, the default unless
        ``$SLIM_MP_PLACEMENT`` says otherwise, times the allow ops where the step runs and keeps
        float32 those for which low precision does not pay, casts included; ``"static"`` runs every
        allow op low) and ``placement_options`` (timing cache, decisions file, measuring target).

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
    dtype, device, region, decisions, low = plan.dtype, plan.device_type, plan.region, plan.decisions, plan.low_ops
    _check_before_gradients(low)

    emulated = emulation_warning(dtype.name, device)
    notes = [emulated] if emulated else []
    ports = {op: d.ports for op, d in decisions.items()}
    if dry_run:
        conversions = planned_conversions(low, ports, dtype)
        remap = None
    else:
        rebuilder = rebuild_low_precision(region.graph, low, ports, dtype, plan.gradient_kernels)
        conversions = rebuilder.conversions
        notes.extend(rebuilder.warnings)
        remap = rebuilder.remap
    if not low:
        already = any(t.dtype == dtype for op in region.ops for t in op.outputs)
        if plan.placement is not None and plan.placement.float32_ops and not already:
            notes.append(
                f"nothing was converted to {dtype.name}: the measured placement kept every allow op float32, "
                f"{dtype.name} does not pay on this device for these shapes (see the float32 reasons); "
                "placement='static' converts them anyway."
            )
        elif not already:
            notes.append(
                f"nothing was converted to {dtype.name}: no allow-list op (Conv2D, MatMul, ...) computes "
                "the fetches, or all were kept float32 (see the float32 reasons)."
            )
    for note in notes:
        warnings.warn(note, stacklevel=2)

    unlisted = collections.Counter(op.type for op, d in decisions.items() if d.op_class == "unlisted")
    float32_entries = [
        (op.name, d.reason) for op, d in decisions.items()
        if d.colour != LOW and not d.reason.startswith(_QUIET_REASONS)
    ]
    return RewriteReport(
        precision=dtype.name,
        device_type=device,
        dry_run=dry_run,
        ops_considered=len(decisions),
        ops_converted=len(low),
        class_counts=class_counts(decisions),
        conversions=conversions,
        float32_ops=group_float32_ops(float32_entries),
        unlisted_op_types=dict(unlisted),
        warnings=notes,
        seconds=time.perf_counter() - started,
        placement=plan.placement,
        _remap=remap,
    )
