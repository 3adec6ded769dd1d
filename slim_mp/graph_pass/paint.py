"""Decide, per op, whether it runs in low precision: step 4 of the pass (``slim_mp.graph_pass`` numbers them).

Every op of the region with float32 data gets a colour, low or float32, and a reason. Sources
(constants, placeholders, variable reads) and stateful ops (variable updates, random numbers) are
never painted: casts go around them. ``paint`` runs four phases, each a function of frozen values:

1. Classify (``_classified``): each op gets its class; fixed float32 are ops inside TF1 control flow,
   function calls and functional loops/conds, ops under a keep-float32 name scope, ``deny`` and
   unlisted op types, ops whose definition or kernels on the target device have no low-precision
   variant, and ops a placement decision keeps float32 (``PaintConfig.fixed_float32``: op name ->
   reason, e.g. measured slower in low).
2. Deny taint (``_deny_tainted``): walking downstream from each ``deny`` op, infer ops (and clear ops
   that lead into an infer or deny op) are tainted and stay float32: their inputs may exceed the low
   type's range.
3. Spread (``_spread_low``): ``allow`` ops (and ops already producing the low type) are low; then,
   until nothing changes, infer/clear ops on a path between low ops become low, an infer op with a low
   producer and no tainted producer becomes low, a clear op next to a low op becomes low, and an
   existing Cast from an integer/bool type to float32 whose consumers are all low is retargeted.
4. Decide (``_final_decision``): each op's colour, with its class's reason or why it stays float32.

Casts then sit only where a low op meets a float32 one (steps 5 and 6: ``refine``, ``rebuild``).
"""

import collections
import dataclasses
from typing import Dict, Iterable, List, Mapping, Sequence, Set, Tuple

import tensorflow as tf

from slim_mp.graph_pass.op_classes import FUNCTION_OP_TYPES, SOURCE_OP_TYPES, OpClasses
from slim_mp.graph_pass.op_ports import OpPorts, has_kernel, op_def_allows
from slim_mp.graph_pass.region import Region, in_scopes

LOW, FLOAT32 = "low", "float32"


@dataclasses.dataclass(frozen=True)
class Decision:
    """The colour of one op with float32 data, and why."""

    op: tf.Operation
    op_class: str
    colour: str
    reason: str
    ports: OpPorts


@dataclasses.dataclass
class PaintConfig:
    """What the painter needs besides the graph."""

    precision: tf.DType
    classes: OpClasses
    keep_fp32_scopes: Sequence[str]
    device_type: str
    fixed_float32: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Run the tail after the last allow op in float32 when that needs fewer casts (``refine``); the
    # measured placement turns it off where keeping the tail low was timed faster.
    demote_tail: bool = True


def is_variable_read(op: tf.Operation) -> bool:
    """A reference variable's read (``<variable>/read``): a source, like ``ReadVariableOp``."""
    return op.type == "Identity" and op.inputs[0].dtype._is_ref_dtype


def _never_painted(op: tf.Operation, classes: OpClasses) -> bool:
    """Sources and stateful ops (variable updates, random numbers): casts go around them, silently."""
    stateful = op.op_def.is_stateful and classes.class_of(op.type) != "allow"
    return stateful or op.type in SOURCE_OP_TYPES or is_variable_read(op)


def _fixed_reason(op: tf.Operation, op_class: str, ports: OpPorts, config: PaintConfig) -> str:
    """Why ``op`` must stay float32, or "" if it may be painted."""
    if op._get_control_flow_context() is not None:
        return "inside TF1 control flow (tf.while_loop/tf.cond): left float32, cast at the border"
    if op.type in FUNCTION_OP_TYPES:
        return "function or functional control flow: its body is not rewritten, cast at the border"
    for scope in config.keep_fp32_scopes:
        if in_scopes(op.name, [scope]):
            return f"under keep-float32 scope {scope!r}"
    if op_class == "deny":
        return "deny list"
    if op_class == "unlisted":
        return "unlisted op type"
    if not op_def_allows(op.type, ports.data_attrs, config.precision):
        return f"op definition has no {config.precision.name} variant"
    if not has_kernel(op.type, ports.data_attrs, config.precision, config.device_type):
        return f"no {config.precision.name} kernel on {config.device_type}"
    return config.fixed_float32.get(op.name, "")


def _is_int_to_float_cast(op: tf.Operation) -> bool:
    return (
        op.type == "Cast"
        and op.get_attr("DstT") == tf.float32
        and not tf.dtypes.as_dtype(op.get_attr("SrcT")).is_floating
        and op._get_control_flow_context() is None
    )


class _DataEdges:
    """Float32 data edges between ops of the region: producer output port -> consumer data input port."""

    def __init__(self, region: Region, ports: Dict[tf.Operation, OpPorts]):
        self.producers: Dict[tf.Operation, List[tf.Operation]] = collections.defaultdict(list)
        self.consumers: Dict[tf.Operation, List[tf.Operation]] = collections.defaultdict(list)
        for op in region.ops:
            op_port = ports.get(op)
            if op_port is None:
                continue
            for index, tensor in enumerate(op.inputs):
                producer_ports = ports.get(tensor.op)
                if not op_port.data_inputs[index] or producer_ports is None:
                    continue
                if producer_ports.data_outputs[tensor.value_index]:
                    self.producers[op].append(tensor.op)
                    self.consumers[tensor.op].append(op)


def _walk(starts: Iterable[tf.Operation], neighbours: Dict, allowed: Set[tf.Operation]) -> Set[tf.Operation]:
    """Ops of ``allowed`` reachable from ``starts`` (excluded) along ``neighbours``."""
    seen: Set[tf.Operation] = set()
    queue = collections.deque(starts)
    while queue:
        for nxt in neighbours.get(queue.popleft(), ()):
            if nxt in allowed and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def _low_source_ports(op: tf.Operation, precision: tf.DType) -> OpPorts:
    """Ports of an op that already produces ``precision`` (an earlier rewrite, or a user's cast)."""
    outputs = tuple(t.dtype == precision for t in op.outputs)
    return OpPorts(op.type, frozenset(), tuple(False for _ in op.inputs), outputs)


@dataclasses.dataclass(frozen=True)
class _Classified:
    """Phase 1's result: every paintable op's first decision (float32, with the reason when it is fixed), the
    data edges between them, the ops free to be painted by class, and the ops already producing the low type."""

    decisions: Dict[tf.Operation, Decision]
    edges: _DataEdges
    free_by_class: Dict[str, Set[tf.Operation]]
    already_low: Set[tf.Operation]

    def deny_ops(self) -> Set[tf.Operation]:
        return {op for op, d in self.decisions.items() if d.op_class == "deny"}


def _classified(region: Region, config: PaintConfig) -> _Classified:
    """Phase 1: each op with float32 data gets its class and, where it is fixed float32, the reason."""
    ports: Dict[tf.Operation, OpPorts] = {}
    decisions: Dict[tf.Operation, Decision] = {}
    already_low: Set[tf.Operation] = set()
    for op in region.ops:
        if any(t.dtype == config.precision for t in op.outputs):
            ports[op] = _low_source_ports(op, config.precision)
            already_low.add(op)
            continue
        op_port = region.ports(op)
        if not op_port.has_float_data or _never_painted(op, config.classes):
            continue
        ports[op] = op_port
        if op.type == "Cast":
            op_class = "cast"
            reason = "" if _is_int_to_float_cast(op) else "existing float cast"
        else:
            op_class = config.classes.class_of(op.type)
            reason = _fixed_reason(op, op_class, op_port, config)
        decisions[op] = Decision(op, op_class, FLOAT32, reason, op_port)
    by_class: Dict[str, Set[tf.Operation]] = collections.defaultdict(set)
    for op, decision in decisions.items():
        if not decision.reason:
            by_class[decision.op_class].add(op)
    return _Classified(decisions, _DataEdges(region, ports), dict(by_class), already_low)


def _deny_tainted(classified: _Classified) -> Set[tf.Operation]:
    """Phase 2: the infer ops downstream of a deny op, and the clear ops on the way that lead into an
    infer or deny op."""
    free, edges, deny_ops = classified.free_by_class, classified.edges, classified.deny_ops()
    clear, infer = free.get("clear", set()), free.get("infer", set())
    leads_to_range_sensitive = _walk(infer | deny_ops, edges.producers, clear)
    return _walk(deny_ops, edges.consumers, infer | leads_to_range_sensitive)


def _spread_low(classified: _Classified, tainted: Set[tf.Operation]) -> Set[tf.Operation]:
    """Phase 3: the allow ops and what is already low, then, to a fixpoint, the
    untainted infer/clear ops between low ops or next to them, and int-to-float casts read only by low ops."""
    free, edges = classified.free_by_class, classified.edges
    infer, clear = free.get("infer", set()) - tainted, free.get("clear", set()) - tainted
    low = set(free.get("allow", set())) | classified.already_low
    unsafe_producers = tainted | classified.deny_ops()
    changed = True
    while changed:
        before = len(low)
        candidates = (infer | clear) - low
        low |= _walk(low, edges.consumers, candidates) & _walk(low, edges.producers, candidates)
        for op in infer - low:
            producers = edges.producers[op]
            if any(p in low for p in producers) and not any(p in unsafe_producers for p in producers):
                low.add(op)
        for op in clear - low:
            if any(p in low for p in edges.producers[op]) or any(c in low for c in edges.consumers[op]):
                low.add(op)
        for op in free.get("cast", set()) - low:
            consumers = edges.consumers[op]
            if consumers and all(c in low for c in consumers):
                low.add(op)
        changed = len(low) != before
    return low


def _final_decision(decision: Decision, low: Set[tf.Operation], tainted: Set[tf.Operation]) -> Decision:
    """Phase 4: an op's decision once painted: low with its class's reason, or float32 with why."""
    if decision.op in low:
        return dataclasses.replace(decision, colour=LOW, reason=_low_reason(decision.op_class))
    if decision.op in tainted:
        return dataclasses.replace(decision, reason="downstream of a deny op")
    return decision if decision.reason else dataclasses.replace(decision, reason="no low-precision neighbour")


def paint(region: Region, config: PaintConfig) -> Dict[tf.Operation, Decision]:
    """Colour every op of ``region`` that has float32 data: the module docstring's four phases, in order."""
    classified = _classified(region, config)
    tainted = _deny_tainted(classified)
    low = _spread_low(classified, tainted)
    return {op: _final_decision(decision, low, tainted) for op, decision in classified.decisions.items()}


def _low_reason(op_class: str) -> str:
    return {
        "allow": "allow list",
        "infer": "infer: fed by low-precision ops",
        "clear": "clear: follows low-precision neighbours",
        "cast": "existing cast retargeted: all consumers are low precision",
    }[op_class]


def low_ops(decisions: Dict[tf.Operation, Decision], region: Region) -> List[tf.Operation]:
    """The ops painted low, in the region's topological order."""
    return [op for op in region.ops if op in decisions and decisions[op].colour == LOW]


def class_counts(decisions: Dict[tf.Operation, Decision]) -> Dict[str, Dict[str, Tuple[int, int]]]:
    """Per class and op type: (ops converted, ops seen)."""
    counts: Dict[str, Dict[str, List[int]]] = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0]))
    for decision in decisions.values():
        entry = counts[decision.op_class][decision.op.type]
        entry[1] += 1
        entry[0] += decision.colour == LOW
    return {c: {t: (v[0], v[1]) for t, v in sorted(types.items())} for c, types in sorted(counts.items())}
