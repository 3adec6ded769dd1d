"""The bytes one step moves between the tasks of a cluster, read off a traced step.

A graph run in a cluster is cut into one partition per task; every tensor one task computes and
another reads crosses the wire as a ``_Send``/``_Recv`` pair. ``traced_wire_traffic`` runs one
step with full tracing and the partition graphs: the partition graphs say which tensors cross
between which tasks, and the receiving task's trace records each received tensor's bytes (the
``RecvTensor`` entries of its step stats). What crosses is what the runtime actually sent after
grappler's rewrites, not an estimate from the Python graph.

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


def _received_bytes(run_metadata: tf1.RunMetadata) -> Dict[Tuple[str, str], int]:
    """Bytes received from another task, by (source task, destination task), from the receivers' traces."""
    received: Dict[Tuple[str, str], int] = collections.Counter()
    for device_stats in run_metadata.step_stats.dev_stats:
        for node_stats in device_stats.node_stats:
            match = _RECEIVED.search(node_stats.timeline_label) if node_stats.node_name == "RecvTensor" else None
            if match is None:
                continue
            source, destination = task_of(match.group(2)), task_of(match.group(3))
            if source != destination:
                received[(source, destination)] += sum(
                    output.tensor_description.allocation_description.requested_bytes for output in node_stats.output)
    return received


def wire_traffic(run_metadata: tf1.RunMetadata) -> WireTraffic:
    """The traffic between tasks that a step traced with ``output_partition_graphs`` recorded in ``run_metadata``.

    Raises:
      ValueError: the metadata holds no partition graphs, or tensors crossed between tasks and the
        trace recorded none of their bytes (the step was not traced in full).
    """
    if not run_metadata.partition_graphs:
        raise ValueError("the step was run without output_partition_graphs: nothing says what crossed between tasks")
    tensors, received = _crossing_tensors(run_metadata), _received_bytes(run_metadata)
    if tensors and not received:
        raise ValueError("tensors crossed between tasks but the trace recorded none of their bytes: "
                         "run the step with trace_level=FULL_TRACE")
    return WireTraffic(routes=tuple(
        WireRoute(source_task=source, destination_task=destination, tensors=tensors.get((source, destination), 0),
                  bytes=received.get((source, destination), 0))
        for source, destination in sorted(set(tensors) | set(received))))


def traced_wire_traffic(session: tf1.Session, fetches: Any, feed_dict: Optional[Dict[Any, Any]] = None) -> WireTraffic:
    """Run one step of ``fetches`` traced in full and return what it moved between tasks.

    Tracing slows the step: run it apart from timed steps.
    """
    options = tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE, output_partition_graphs=True)
    run_metadata = tf1.RunMetadata()
    session.run(fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata)
    return wire_traffic(run_metadata)
