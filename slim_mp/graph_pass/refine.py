"""Border refinement: move the casts after the last allow op to where they are fewest.

Painting spreads low precision forward from the last conv/matmul into what follows it (bias add,
squeeze, ...) until a float32 consumer (the loss) is met. That tail then needs casts both on
its float32 side inputs (e.g. the logits bias) and on its exits. If running the tail in float32
needs fewer casts (fewer, or as many but smaller), the tail is demoted: one cast on the allow op's
output replaces them, the logits are computed in float32, and the backward pass saves the same
number of casts.

Leaves alone: an op grappler fuses into its low producer (``op_classes.FUSED_INTO_PRODUCER``: the
logits bias add after its convolution or product, an activation after that bias add). Demoting it
would put a cast between the two and cost the fused kernel, in float32 and in bfloat16 alike.
"""

import collections
import dataclasses
from typing import Dict, List, Sequence, Set, Tuple

import tensorflow as tf

from slim_mp.graph_pass.op_classes import fuses_into
from slim_mp.graph_pass.op_ports import OpPorts
from slim_mp.graph_pass.paint import FLOAT32, Decision, PaintConfig, low_ops, paint
from slim_mp.graph_pass.region import Region
from slim_mp.graph_pass.conversions import planned_conversions


def _fused_into_low_producer(low: Set[tf.Operation], ops: Set[tf.Operation]) -> Set[tf.Operation]:
    """The ops of ``ops`` that grappler fuses into a low producer, directly or through such a chain."""
    fused: Set[tf.Operation] = set()
    grown = True
    while grown:
        grown = False
        for op in ops - fused:
            producer = op.inputs[0].op if fuses_into(op) else None
            if producer in low and (producer not in ops or producer in fused):
                fused.add(op)
                grown = True
    return fused


def _tail(low: Set[tf.Operation], decisions: Dict[tf.Operation, Decision]) -> Set[tf.Operation]:
    """Low ops from which no allow op can be reached through low ops, but for those fused into a low producer."""
    producers: Dict[tf.Operation, List[tf.Operation]] = collections.defaultdict(list)
    for op in low:
        for tensor in op.inputs:
            if tensor.op in low:
                producers[op].append(tensor.op)
    feeds_allow = {op for op in low if decisions[op].op_class == "allow"}
    queue = collections.deque(feeds_allow)
    while queue:
        for producer in producers[queue.popleft()]:
            if producer not in feeds_allow:
                feeds_allow.add(producer)
                queue.append(producer)
    tail = low - feeds_allow
    return tail - _fused_into_low_producer(low, tail)


def _cost(low: Sequence[tf.Operation], ports: Dict[tf.Operation, OpPorts], precision: tf.DType) -> Tuple[int, int]:
    casts = [c for c in planned_conversions(low, ports, precision) if c.kind == "cast"]
    return len(casts), sum(c.bytes_per_step or 0 for c in casts)


def demote_tail(low_ops: List[tf.Operation], decisions: Dict[tf.Operation, Decision],
                precision: tf.DType) -> List[tf.Operation]:
    """Return ``low_ops`` without the tail when float32 there costs fewer casts; update the decisions."""
    low = set(low_ops)
    tail = _tail(low, decisions) & set(decisions)
    if not tail:
        return low_ops
    ports = {op: d.ports for op, d in decisions.items()}
    kept = [op for op in low_ops if op not in tail]
    cost_low, cost_float32 = _cost(low_ops, ports, precision), _cost(kept, ports, precision)
    if cost_float32 >= cost_low:
        return low_ops
    reason = f"after the last allow op, float32 needs fewer casts ({cost_float32[0]} vs {cost_low[0]})"
    for op in tail:
        decisions[op] = dataclasses.replace(decisions[op], colour=FLOAT32, reason=reason)
    return kept


def painted_low_ops(region: Region, config: PaintConfig) -> Tuple[Dict[tf.Operation, Decision], List[tf.Operation]]:
    """Paint ``region`` and refine its tail (unless ``config.demote_tail`` is off): (decisions, low ops in order)."""
    decisions = paint(region, config)
    low = low_ops(decisions, region)
    if config.demote_tail:
        low = demote_tail(low, decisions, config.precision)
    return decisions, low
