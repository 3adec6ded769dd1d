"""Past this machine, on paper: how many workers one parameter server's link carries, and how many servers N need.

The model, stated once (the reports quote ``MODEL``):

- a worker's step moves ``sent`` bytes to the parameter servers (its gradients) and ``received``
  bytes from them (its weights); the link is full duplex, so each direction carries its own share,
  and the busier direction, ``max(sent, received)``, is what a link has to carry per worker step;
- N workers stepping on their own (asynchronously) put N times that on one parameter server's link
  per step time; the wire sets the pace once that takes longer than the step: ``N * max(sent,
  received) * 8 / bandwidth > step seconds``. The workers one link carries is the largest N for
  which it does not;
- with P parameter servers the variables (and so the bytes) split evenly over P links (the ideal;
  ``replica_device_setter``'s round robin only approaches it); the servers N workers need is the
  smallest P that keeps each link within the step time. A worker's own link carries its whole
  ``max(sent, received)`` whatever P is: if that alone is longer than the step, no number of
  parameter servers keeps it compute-bound (None);
- the step time is the worker's compute, the one-process step of the same precision (no wire at
  all: smaller than the cluster step, so the counts are on the safe side);
- a single worker on a link of its own takes between ``max(step, wire)`` (transfers fully
  overlapped with compute) and the step plus both directions' transfers one after the other (none
  overlapped) per step (``one_worker_step``),
  what the shaped-link run checks.

Pure arithmetic on measured numbers; ``cluster_report`` writes the tables.
"""

import dataclasses
import math
from typing import Optional, Tuple

LINK_GBITS = (1.0, 10.0, 100.0)
WORKER_COUNTS = (8, 32, 128)
BITS_PER_BYTE = 8
MODEL = ("full duplex: each direction carries its own bytes, so a worker's step costs the link the busier direction, "
         "max(sent, received); N asynchronous workers put N times that on one parameter server's link per step; the "
         "wire sets the pace when N x max(sent, received) x 8 / bandwidth exceeds the step time (the one-process "
         "step of the same precision, the worker's compute); P parameter servers split the bytes evenly over P links")


@dataclasses.dataclass(frozen=True)
class WireLoad:
    """What one worker's step costs: its compute seconds and the bytes it sends to and receives from the servers."""

    step_seconds: float
    sent_bytes: int
    received_bytes: int

    def __post_init__(self) -> None:
        if not self.step_seconds > 0 or self.sent_bytes < 0 or self.received_bytes < 0:
            raise ValueError(f"a wire load needs a positive step time and bytes >= 0, not {self}.")

    @property
    def busier_direction_bytes(self) -> int:
        """The bytes of the direction that carries more per step: what bounds a full-duplex link."""
        return max(self.sent_bytes, self.received_bytes)

    def wire_seconds(self, link_gbits: float) -> float:
        """Seconds the busier direction of one worker's step takes on a link of ``link_gbits`` Gbit/s each way."""
        return self.busier_direction_bytes * BITS_PER_BYTE / (link_gbits * 1e9)


def workers_per_link(load: WireLoad, link_gbits: float) -> Optional[int]:
    """The most workers one parameter server's link of ``link_gbits`` carries before the wire sets the pace.

    None when a step moves no bytes (the wire never sets the pace).
    """
    wire = load.wire_seconds(link_gbits)
    if wire == 0:
        return None
    return math.floor(load.step_seconds / wire)


def parameter_servers_for(workers: int, load: WireLoad, link_gbits: float) -> Optional[int]:
    """The fewest parameter servers (the bytes split evenly) that keep ``workers`` workers compute-bound.

    None when even one worker's own link (``link_gbits``) takes longer than its step: no number of
    servers helps then.
    """
    wire = load.wire_seconds(link_gbits)
    if wire > load.step_seconds:
        return None
    return max(1, math.ceil(workers * wire / load.step_seconds))


def one_worker_step(load: WireLoad, link_gbits: float) -> Tuple[float, float]:
    """The seconds a lone worker's step takes on a link of ``link_gbits``: (every transfer overlapped with compute and
    the other direction, none overlapped: the step, then both directions one after the other)."""
    both_ways = (load.sent_bytes + load.received_bytes) * BITS_PER_BYTE / (link_gbits * 1e9)
    return max(load.step_seconds, load.wire_seconds(link_gbits)), load.step_seconds + both_ways
