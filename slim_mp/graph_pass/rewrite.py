"""``slim_mp.rewrite``: run a built TF-Slim graph in float16 or bfloat16, without editing the network.

The pipeline, one module per step: ``select`` (the ops computing the fetches) -> ``op_classes``
(allow/infer/clear/deny tables) -> ``paint`` (low or float32 per op) -> ``refine`` (move the
tail's casts to where they are fewest) -> ``rebuild`` (new ops, shared casts, consumers
re-routed) -> ``report``.
"""

import collections
import time
import warnings
from typing import Any, Iterable, Optional

import tensorflow as tf

from slim_mp.devices import device_type as detected_device_type
from slim_mp.devices import emulation_warning
from slim_mp.graph_pass.conversions import planned_conversions
from slim_mp.graph_pass.op_classes import default_classes
from slim_mp.graph_pass.paint import LOW, PaintConfig, class_counts, low_ops, paint
from slim_mp.graph_pass.placement import PlacementOptions, measured_placement, resolve_placement
from slim_mp.graph_pass.rebuild import Rebuilder
from slim_mp.graph_pass.refine import demote_tail
from slim_mp.graph_pass.region import select_region
from slim_mp.graph_pass.report import RewriteReport, group_float32_ops
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


def rewrite(
    fetches: Any,
    precision: PrecisionLike = "float16",
    *,
    allow: Iterable[str] = (),
    infer: Iterable[str] = (),
    clear: Iterable[str] = (),
    deny: Iterable[str] = (),
    remove: Iterable[str] = (),
    keep_fp32_scopes: Iterable[str] = (),
    device_type: Optional[str] = None,
    include_update_ops: bool = True,
    dry_run: bool = False,
    placement: Optional[str] = None,
    placement_options: Optional[PlacementOptions] = None,
) -> RewriteReport:
    """Rewrite, in place, the part of the graph that computes ``fetches`` to run in low precision.

    Call it on the loss (or logits) before ``tf.gradients`` / ``optimizer.minimize``: the backward
    pass then inherits the low precision. Variables stay float32 (master weights); their reads are
    cast once. ``allow``/``infer``/``clear``/``deny`` move op types into that class, ``remove`` makes
    op types unlisted (float32), ``keep_fp32_scopes`` keeps every op under those name scopes in
    float32. The graph's ``UPDATE_OPS`` (batch-norm moving averages) run with every train step, so
    what they compute is rewritten too unless ``include_update_ops=False`` (e.g. an auxiliary head
    outside the loss). ``device_type`` (``CPU``/``GPU``) is where unplaced ops run, detected by
    default. ``dry_run=True`` returns the plan and leaves the graph untouched.

    ``placement="measured"`` (the default, unless ``$SLIM_MP_PLACEMENT`` says otherwise) times the
    allow ops on this device with their real shapes and keeps float32 those for which low precision
    does not pay, casts included (``slim_mp.graph_pass.placement``; timings cached on disk,
    ``placement_options`` sets the cache, a decisions file to reuse, or a fake ``measure`` for tests);
    ``placement="static"`` runs every allow op low, as the tables say.

    Example::

        logits, end_points = resnet_v1.resnet_v1_50(images, 1000)
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
        report = slim_mp.rewrite(loss, "bfloat16", keep_fp32_scopes=["resnet_v1_50/logits"])
        print(report.summary())
        end_points = report.remap(end_points)
        train_op = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
    """
    started = time.perf_counter()
    dtype = resolve_precision(precision)
    overrides = {"allow": allow, "infer": infer, "clear": clear, "deny": deny}
    classes = default_classes(dtype).with_overrides(
        {name: list(types) for name, types in overrides.items()}, remove=list(remove)
    )
    device = device_type or detected_device_type()
    if device not in ("CPU", "GPU"):
        raise ValueError(f"device_type={device_type!r} is not supported; use 'CPU' or 'GPU'.")
    region = select_region(fetches)
    update_ops = region.graph.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    if include_update_ops and update_ops:
        region = select_region([fetches, update_ops])
    paint_config = PaintConfig(dtype, classes, list(keep_fp32_scopes), device)
    plan = None
    if resolve_placement(placement) == "measured":
        plan = measured_placement(region, paint_config, placement_options)
        paint_config.fixed_float32 = plan.float32_ops
    decisions = paint(region, paint_config)
    low = demote_tail(low_ops(decisions, region), decisions, dtype)
    _check_before_gradients(low)

    emulated = emulation_warning(dtype.name, device)
    notes = [emulated] if emulated else []
    ports = {op: d.ports for op, d in decisions.items()}
    if dry_run:
        conversions = planned_conversions(low, ports, dtype)
        remap = None
    else:
        rebuilder = Rebuilder(region.graph, dtype)
        for op in low:
            rebuilder.rebuild(op, ports[op])
        for op in low:
            rebuilder.reroute(op)
        rebuilder.remap_collections()
        conversions = rebuilder.conversions
        notes.extend(rebuilder.warnings)
        remap = rebuilder.remap
    if not low:
        already = any(t.dtype == dtype for op in region.ops for t in op.outputs)
        if plan is not None and plan.float32_ops and not already:
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
        placement=plan.as_json() if plan else None,
        _remap=remap,
    )
