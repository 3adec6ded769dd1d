"""How much of a traced step runs in parallel, and which chain of dependent ops bounds it.

Read from one traced step's step stats and executed (partition) graphs:

- parallelism: the sum of op times over the step's span (first op start to last op end). A
  chain of ops has 1; ``k`` equal independent ops on ``k`` cores have ``k``.
- critical path: the longest chain of ops linked by data or control edges of the executed graph,
  weighted by op time. However many cores, the step is no shorter; the sum of op times over it is
  the parallelism the graph allows (``available_parallelism``), which the scheduler can only lose.
  The same chain over data edges alone (``data_critical_path_ms``) shows what control edges cost,
  e.g. an optimizer's ``gate_gradients=GATE_OP``, which makes each layer's gradients wait for all
  of the gradients of the op after it.
- idle core time: over the span, at each instant, the cores minus the ops running then (never
  below zero), integrated. ``no_op_ms``: the instants with no op running at all (scheduling gaps).
- alone time per op type: the instants with exactly one op running, given to that op's type:
  the ops that serialise the step.
- the casts on the critical path, their count and time.

Op time is wall time: an op spreading over both cores with intra-op threads counts once. An op
run several times in one step (a loop body) weighs the sum of its runs on the critical path, and
an edge closing a cycle (a loop's back edge) is dropped.
"""

import collections
import dataclasses
import heapq
import statistics
from typing import Dict, Iterator, List, Mapping, Sequence, Set, Tuple

import tensorflow as tf

from slim_mp.op_families import op_family

tf1 = tf.compat.v1

CAST_TYPE = "Cast"
_TOP_TYPES = 12


@dataclasses.dataclass(frozen=True)
class TracedOp:
    """One run of an executed op: its family, when it ran (step-stats microseconds), what it waited on."""

    name: str
    op_type: str
    start_micros: int
    end_micros: int
    inputs: Tuple[str, ...] = ()
    control_inputs: Tuple[str, ...] = ()

    @property
    def micros(self) -> int:
        return self.end_micros - self.start_micros


@dataclasses.dataclass(frozen=True)
class StepParallelism:
    """The figures of one traced step, or each figure's median over several (ratios too: the median ratio).

    ``parallelism`` is the sum of op times over the span (how many ops ran at once, on average);
    ``available_parallelism`` the sum over the critical path (the most the graph allows).
    """

    cores: int
    parallelism: float
    available_parallelism: float
    span_ms: float
    op_ms: float
    critical_path_ms: float
    data_critical_path_ms: float
    critical_path_ops: int
    critical_casts: int
    critical_cast_ms: float
    idle_core_ms: float
    no_op_ms: float
    critical_by_type: Mapping[str, float]
    alone_by_type: Mapping[str, float]

    @property
    def alone_ms(self) -> float:
        """Milliseconds with exactly one op running."""
        return sum(self.alone_by_type.values())

    def to_dict(self) -> dict:
        """Every field and derived figure, for JSON."""
        return dict(dataclasses.asdict(self), alone_ms=self.alone_ms)


def executed_node_defs(metadata: tf1.RunMetadata) -> Dict[str, tf1.NodeDef]:
    """The executed graph's nodes by name, from the partition graphs of a traced run."""
    return {node.name: node for graph in metadata.partition_graphs for node in graph.node}


def timed_node_stats(metadata: tf1.RunMetadata) -> Iterator:
    """Every ``NodeExecStats`` of a traced run, over all its devices."""
    for device in metadata.step_stats.dev_stats:
        yield from device.node_stats


def traced_ops(metadata: tf1.RunMetadata) -> List[TracedOp]:
    """Every op run that the step stats timed and the partition graphs hold, with its producers."""
    nodes = executed_node_defs(metadata)
    runs = []
    for stats in timed_node_stats(metadata):
        node = nodes.get(stats.node_name)
        if node is None:
            continue
        data = tuple(name.split(":")[0] for name in node.input if not name.startswith("^"))
        control = tuple(name[1:] for name in node.input if name.startswith("^"))
        runs.append(TracedOp(stats.node_name, op_family(node.op), stats.all_start_micros + stats.op_start_rel_micros,
                             stats.all_start_micros + stats.op_end_rel_micros, data, control))
    return runs


def _topological_order(weights: Mapping[str, float], producers: Mapping[str, Set[str]],
                       first_start: Mapping[str, int]) -> List[Tuple[str, Set[str]]]:
    """Names producers first (earliest start first among the ready), each with the producers it may count."""
    waiting = {name: set(producers[name]) for name in weights}
    consumers: Dict[str, List[str]] = collections.defaultdict(list)
    for name, inputs in waiting.items():
        for producer in inputs:
            consumers[producer].append(name)
    ready = [(first_start[name], name) for name, inputs in waiting.items() if not inputs]
    heapq.heapify(ready)
    done: Set[str] = set()
    order = []
    while len(done) < len(weights):
        if not ready:  # a cycle: start from its earliest op and drop the edges that close it
            stuck = min((first_start[name], name) for name in weights if name not in done)
            waiting[stuck[1]].clear()
            ready.append(stuck)
        _, name = heapq.heappop(ready)
        if name in done:
            continue
        done.add(name)
        order.append((name, set(producers[name]) & done))
        for consumer in consumers[name]:
            waiting[consumer].discard(name)
            if not waiting[consumer] and consumer not in done:
                heapq.heappush(ready, (first_start[consumer], consumer))
    return order


def critical_path(runs: Sequence[TracedOp], control_edges: bool = True) -> Tuple[float, List[str]]:
    """The longest chain of dependent ops by op time: (its microseconds, its op names in run order).

    ``control_edges=False`` follows data edges alone.
    """
    weights: Dict[str, float] = collections.defaultdict(float)
    first_start: Dict[str, int] = {}
    producers: Dict[str, Set[str]] = collections.defaultdict(set)
    for run in runs:
        weights[run.name] += run.micros
        first_start[run.name] = min(first_start.get(run.name, run.start_micros), run.start_micros)
        producers[run.name].update(run.inputs + (run.control_inputs if control_edges else ()))
    for name in weights:
        producers[name] &= weights.keys()
        producers[name].discard(name)
    longest: Dict[str, float] = {}
    parent: Dict[str, str] = {}
    for name, counted in _topological_order(weights, producers, first_start):
        before = max(counted, key=lambda producer: (longest[producer], producer), default=None)
        longest[name] = weights[name] + (longest[before] if before is not None else 0.0)
        if before is not None:
            parent[name] = before
    if not longest:
        return 0.0, []
    last = max(longest, key=lambda name: (longest[name], name))
    path = [last]
    while path[-1] in parent:
        path.append(parent[path[-1]])
    return longest[last], path[::-1]


def _sweep(runs: Sequence[TracedOp], cores: int) -> Tuple[float, float, Dict[str, float]]:
    """(idle core microseconds, microseconds with no op running, microseconds alone per op type)."""
    events: Dict[int, List[Tuple[int, int]]] = collections.defaultdict(list)
    for index, run in enumerate(runs):
        events[run.start_micros].append((1, index))
        events[run.end_micros].append((-1, index))
    running: Set[int] = set()
    idle = empty = 0.0
    alone: Dict[str, float] = collections.defaultdict(float)
    moments = sorted(events)
    for moment, following in zip(moments, moments[1:]):
        for change, index in events[moment]:
            if change > 0:
                running.add(index)
            else:
                running.discard(index)
        gap = following - moment
        idle += max(0, cores - len(running)) * gap
        empty += gap if not running else 0
        if len(running) == 1:
            alone[runs[next(iter(running))].op_type] += gap
    return idle, empty, alone


def _largest(values: Mapping[str, float]) -> Dict[str, float]:
    return dict(sorted(values.items(), key=lambda item: -item[1])[:_TOP_TYPES])


def step_parallelism(runs: Sequence[TracedOp], cores: int) -> StepParallelism:
    """The figures of the module docstring for one traced step's op runs on ``cores`` cores."""
    if cores < 1:
        raise ValueError(f"cores={cores} must be at least 1.")
    if not runs:
        return StepParallelism(cores, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0.0, 0.0, 0.0, {}, {})
    span = max(run.end_micros for run in runs) - min(run.start_micros for run in runs)
    path_micros, path = critical_path(runs)
    op_type = {run.name: run.op_type for run in runs}
    micros: Dict[str, float] = collections.defaultdict(float)
    for run in runs:
        micros[run.name] += run.micros
    on_path: Dict[str, float] = collections.defaultdict(float)
    for name in path:
        on_path[op_type[name]] += micros[name] / 1e3
    casts = [name for name in path if op_type[name] == CAST_TYPE]
    idle, empty, alone = _sweep(runs, cores)
    op_micros = sum(run.micros for run in runs)
    return StepParallelism(
        cores, op_micros / span if span else 0.0, op_micros / path_micros if path_micros else 0.0,
        span / 1e3, op_micros / 1e3, path_micros / 1e3, critical_path(runs, control_edges=False)[0] / 1e3,
        len(path), len(casts),
        sum(micros[name] for name in casts) / 1e3, idle / 1e3, empty / 1e3, _largest(on_path),
        _largest({name: value / 1e3 for name, value in alone.items()}))


def median_parallelism(steps: Sequence[StepParallelism]) -> StepParallelism:
    """Each figure's median over ``steps`` (a type missing from a step counts 0 there)."""
    if not steps:
        raise ValueError("median_parallelism needs at least one traced step.")

    def per_type(field: str) -> Dict[str, float]:
        types = set().union(*(getattr(step, field) for step in steps))
        return _largest({name: statistics.median(getattr(step, field).get(name, 0.0) for step in steps)
                         for name in types})

    scalars = {field.name: statistics.median(getattr(step, field.name) for step in steps)
               for field in dataclasses.fields(StepParallelism)
               if field.name not in ("critical_by_type", "alone_by_type")}
    return StepParallelism(**scalars, critical_by_type=per_type("critical_by_type"),
                           alone_by_type=per_type("alone_by_type"))
