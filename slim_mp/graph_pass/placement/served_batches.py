"""An inference graph whose batch is unknown, timed at the batches it will serve.

TF-Slim's export writes its input as ``[None, height, width, channels]``: the caller picks the batch at
run time. No op of such a graph has a static shape, so nothing could be timed, and the static lists
alone would decide; where the precision is emulated (bfloat16 with oneDNN off, an AVX2-only CPU) that
made the served model slower than float32. So an inference graph whose placeholders lack only their
first dimension is decided at each of ``PlacementMeasuring.serving_batch_sizes`` (``served_batches``):
the graph is imported again with those placeholders of that batch (``at_batch``), which gives every
op its static shapes for the signatures, the cache keys and the whole-step copies, and the plans of
every batch are joined (``joined_plan``): an op stays low only where it paid at every batch.
"""

import dataclasses
import time
from typing import Callable, Dict, List, Sequence, Tuple

import tensorflow as tf

from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement.options import PlacementMeasuring, PlacementOptions
from slim_mp.graph_pass.placement.plan import PlacementPlan
from slim_mp.graph_pass.region import Region

_PLACEHOLDER = "Placeholder"
# decide(region, config, options, objectives) -> the plan of steps 2-7 (``measured._decided``).
Decide = Callable[[Region, PaintConfig, PlacementOptions, Sequence[tf.Tensor]], PlacementPlan]


def _unknown_batch_inputs(region: Region) -> List[tf.Operation]:
    """The region's placeholders whose shape lacks its first dimension only; none when any placeholder lacks
    another (no batch makes that one static)."""
    unknown = []
    for op in region.ops:
        if op.type != _PLACEHOLDER:
            continue
        shape = op.outputs[0].shape
        if shape.is_fully_defined():
            continue
        if shape.rank is None or shape.rank < 1 or not shape[1:].is_fully_defined():
            return []
        unknown.append(op)
    return unknown


def served_batches(region: Region, measuring: PlacementMeasuring) -> Tuple[int, ...]:
    """The batches to decide ``region`` at: ``measuring.serving_batch_sizes`` for an inference step
    (``MeasuringTarget.training`` off) whose placeholders lack only their batch; () when the region's own
    shapes are timed (or nothing gives them)."""
    if measuring.target.training or not _unknown_batch_inputs(region):
        return ()
    return measuring.serving_batch_sizes


def at_batch(region: Region, objectives: Sequence[tf.Tensor], batch: int) -> Tuple[Region, List[tf.Tensor]]:
    """``region`` and ``objectives`` in a new graph, the same ops by name, whose unknown-batch placeholders
    hold ``batch`` examples: TensorFlow's shape inference then gives every op its static shapes."""
    names = {op.name for op in _unknown_batch_inputs(region)}
    graph_def = region.graph.as_graph_def()
    for node in graph_def.node:
        if node.name in names:
            node.attr["shape"].shape.dim[0].size = batch
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    return (Region(graph, [graph.get_operation_by_name(op.name) for op in region.ops]),
            [graph.get_tensor_by_name(tensor.name) for tensor in objectives])


def batch_words(batches: Sequence[int]) -> str:
    """``batch 1 and 32``, ``batch 1, 8 and 32``: how the reports name the batches timed."""
    shown = [str(batch) for batch in batches]
    return "batch " + (", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else shown[0])


def joined_plan(plans: Dict[int, PlacementPlan], seconds: float) -> PlacementPlan:
    """One plan of the plans decided at each batch (by batch): an op stays low only where every plan keeps it
    low (so a placement, or a whole step, that lost at any batch keeps its ops float32 there), each op kept
    float32 with the reason of the first batch that kept it. Estimates, candidates, the check and the gradient
    kernels are the largest batch's (its reasons name it); the signatures measured and cached are summed.

    Not timed at some batch (nothing there had a static shape, or nothing could be timed), the join is that
    plan: the decision without timing holds for the whole graph.
    """
    batches = sorted(plans)
    untimed = [plans[batch] for batch in batches if not plans[batch].timed]
    if untimed:
        return dataclasses.replace(untimed[0], seconds=seconds)
    float32_ops: Dict[str, str] = {}
    for batch in batches:
        for name, reason in plans[batch].float32_ops.items():
            float32_ops.setdefault(name, f"at batch {batch}: {reason}")
    low_ops = sorted(set.intersection(*(set(plans[batch].low_ops) for batch in batches)) - set(float32_ops))
    largest = plans[batches[-1]]
    kernels = largest.gradient_kernels.only(low_ops)
    return dataclasses.replace(
        largest, float32_ops=dict(sorted(float32_ops.items())), low_ops=low_ops,
        tail_low=all(plans[batch].tail_low for batch in batches), gradient_kernels=kernels,
        gradient_reasons={name: largest.gradient_reasons[name] for name in sorted(kernels.names())},
        measured_signatures=sum(plan.measured_signatures for plan in plans.values()),
        cached_signatures=sum(plan.cached_signatures for plan in plans.values()),
        seconds=seconds, timed_batches=tuple(batches))


def decided_at_batches(region: Region, config: PaintConfig, options: PlacementOptions,
                       objectives: Sequence[tf.Tensor], batches: Sequence[int], decide: Decide) -> PlacementPlan:
    """``decide`` at each of ``batches`` on ``region`` given that static batch (``at_batch``), the plans joined
    (``joined_plan``). Each batch's whole steps are fed all its examples: the batch served is the one to time,
    not ``step_max_batch`` of it."""
    started = time.perf_counter()
    plans = {}
    for batch in batches:
        served_region, served_objectives = at_batch(region, objectives, batch)
        measuring = dataclasses.replace(options.measuring, step_max_batch=max(options.measuring.step_max_batch, batch))
        plans[batch] = decide(served_region, config, dataclasses.replace(options, measuring=measuring),
                              served_objectives)
    return joined_plan(plans, time.perf_counter() - started)
