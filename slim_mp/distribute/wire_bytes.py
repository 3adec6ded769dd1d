"""The bytes one step moves between the tasks of a cluster, read off a traced step.

A graph run in a cluster is cut into one partition per task; every tensor one task computes and
another reads crosses the wire as a ``_Send``/``_Recv`` pair. ``traced_wire_traffic`` runs one
step with full tracing and the partition graphs: the partition graphs say which tensors cross
between which tasks, and the receiving task's trace records each received tensor's bytes (the
``RecvTensor`` entries of its step stats). What crosses is what the runtime actually sent after
grappler's rewrites, not an estimate from the Python graph.

TensorFlow's master turns each task's RPC logging on (and off again) for a traced step without waiting
for the task to answer, so a task can begin logging after the step's first tensors reached it (about one
traced step in eight on two loopback tasks). A trace is whole when every route recorded one ``RecvTensor``
entry per tensor the partition graphs say crossed it; ``traced_wire_traffic`` traces the step again until
one is.

Leaves alone: tensors moved between devices of one task (a GPU and its host) — they never reach the
network — and the fetches and feeds exchanged with the client.
"""

import collections
import dataclasses
import re
from typing import Any, Dict, Optional, Tuple

import tensorflow as tf

tf1 = tf.compat.v1

_TASK = re.compile(r"^(/job:[^/]+/replica:\d+/task:\d+)")
# The label a task's trace gives a tensor it received from another task: "[size] [rate] <edge> from <src> to <dst>".
_RECEIVED = re.compile(r"(\S+) from (\S+) to (\S+)$")
_RECEIVE_OP_TYPES = ("_Recv", "_HostRecv")
# Steps traced at most, to get one whose every task logged all it received (see the module docstring).
_TRACE_ATTEMPTS = 10


class IncompleteTraceError(ValueError):
    """A traced step's receivers recorded fewer tensors than crossed between tasks: trace another step."""


def task_of(device: str) -> str:
    """The task part (``/job:ps/replica:0/task:0``) of a full device name; the name itself when it has none."""
    match = _TASK.match(device)
    return match.group(1) if match else device


def _names_task(task: str, pattern: str) -> bool:
    """True when ``task`` (a full task name) is the one ``pattern`` names, with or without ``/replica:0``."""
    return task == pattern or task.replace("/replica:0", "") == pattern


@dataclasses.dataclass(frozen=True)
class WireRoute:
    """What one step sent from one task to another: how many tensors, how many bytes."""

    source_task: str
    destination_task: str
    tensors: int
    bytes: int


@dataclasses.dataclass(frozen=True)
class WireTraffic:
    """The bytes one traced step moved between the tasks of a cluster, by route (source, destination)."""

    routes: Tuple[WireRoute, ...]

    def sent_by(self, task: str) -> int:
        """Bytes ``task`` (``/job:worker/task:0`` or a full task name) sent to other tasks."""
        return sum(route.bytes for route in self.routes if _names_task(route.source_task, task))

    def received_by(self, task: str) -> int:
        """Bytes ``task`` received from other tasks."""
        return sum(route.bytes for route in self.routes if _names_task(route.destination_task, task))

    def across(self, task: str) -> int:
        """Bytes between ``task`` and every other task, both directions."""
        return self.sent_by(task) + self.received_by(task)

    def as_json(self) -> Dict[str, Any]:
        """Plain JSON: every route with its tensors and bytes."""
        return {"routes": [dataclasses.asdict(route) for route in self.routes]}


def _crossing_tensors(run_metadata: tf1.RunMetadata) -> Dict[Tuple[str, str], int]:
    """Tensors received from another task, counted by (source task, destination task), from the partition graphs."""
    counts: Dict[Tuple[str, str], int] = collections.Counter()
    for partition in run_metadata.partition_graphs:
        for node in partition.node:
            if node.op not in _RECEIVE_OP_TYPES:
                continue
            source = task_of(node.attr["send_device"].s.decode())
            destination = task_of(node.attr["recv_device"].s.decode())
            if source != destination:
                counts[(source, destination)] += 1
    return counts


def _received(run_metadata: tf1.RunMetadata) -> Tuple[Dict[Tuple[str, str], int], Dict[Tuple[str, str], int]]:
    """Tensors and bytes received from another task, by (source task, destination task), from the receivers' traces."""
    tensors: Dict[Tuple[str, str], int] = collections.Counter()
    received_bytes: Dict[Tuple[str, str], int] = collections.Counter()
    for device_stats in run_metadata.step_stats.dev_stats:
        for node_stats in device_stats.node_stats:
            match = _RECEIVED.search(node_stats.timeline_label) if node_stats.node_name == "RecvTensor" else None
            if match is None:
                continue
            route = (task_of(match.group(2)), task_of(match.group(3)))
            if route[0] != route[1]:
                tensors[route] += 1
                received_bytes[route] += sum(
                    output.tensor_description.allocation_description.requested_bytes for output in node_stats.output)
    return tensors, received_bytes


def wire_traffic(run_metadata: tf1.RunMetadata) -> WireTraffic:
    """The traffic between tasks that a step traced with ``output_partition_graphs`` recorded in ``run_metadata``.

    Raises:
      ValueError: the metadata holds no partition graphs.
      IncompleteTraceError: a route's receiver recorded fewer tensors than crossed it (the step was not
        traced in full, or a task's logging began after the step's first tensors reached it).
    """
    if not run_metadata.partition_graphs:
        raise ValueError("the step was run without output_partition_graphs: nothing says what crossed between tasks")
    crossing, (recorded, received_bytes) = _crossing_tensors(run_metadata), _received(run_metadata)
    routes = sorted(set(crossing) | set(recorded))
    unrecorded = [route for route in routes if recorded.get(route, 0) < crossing.get(route, 0)]
    if unrecorded:
        source, destination = unrecorded[0]
        raise IncompleteTraceError(
            f"{crossing[unrecorded[0]]} tensors crossed from {source} to {destination} but its trace recorded "
            f"{recorded.get(unrecorded[0], 0)}: run the step with trace_level=FULL_TRACE, or trace another step")
    return WireTraffic(routes=tuple(
        WireRoute(source_task=source, destination_task=destination, tensors=crossing.get((source, destination), 0),
                  bytes=received_bytes.get((source, destination), 0))
        for source, destination in routes))


def traced_wire_traffic(session: tf1.Session, fetches: Any, feed_dict: Optional[Dict[Any, Any]] = None) -> WireTraffic:
    """Run a step of ``fetches`` traced in full and return what it moved between tasks.

    Runs the step again, at most ``_TRACE_ATTEMPTS`` times in all, while a task's trace missed tensors it
    received (see the module docstring): each run is a step, so a training step may advance more than once.
    Tracing slows the step: run it apart from timed steps.

    Raises:
      IncompleteTraceError: no traced step recorded every tensor that crossed.
    """
    for _ in range(_TRACE_ATTEMPTS - 1):
        try:
            return wire_traffic(_traced_run(session, fetches, feed_dict))
        except IncompleteTraceError:
            continue
    return wire_traffic(_traced_run(session, fetches, feed_dict))


def _traced_run(session: tf1.Session, fetches: Any, feed_dict: Optional[Dict[Any, Any]]) -> tf1.RunMetadata:
    """The metadata of one run of ``fetches`` traced in full, with its partition graphs."""
    options = tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE, output_partition_graphs=True)
    run_metadata = tf1.RunMetadata()
    session.run(fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata)
    return run_metadata
