"""The per-op estimate of a step: the timed ops' measured times as painted, plus the casts painting implies.

The timed ops are the allow ops and the ops that follow them low (element-wise ops, batch norm,
pooling). For a placement the painting rules run as usual; the estimate is the timed ops' times
(low or float32 as painted, low ones charged ``margin`` more: ``OpTiming.charged_low_ms``) plus
the casts that painting implies (``planned_conversions``), a cast costing ``a + b * elements``
(fitted from two timed sizes). The connected low regions and, inside them, the follower islands
are the units the search flips together (``low_regions``, ``follower_islands``).
"""

import dataclasses
from typing import Dict, FrozenSet, List, Mapping, Set, Tuple

import tensorflow as tf

from slim_mp.graph_pass.conversions import planned_conversions
from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement.candidate import Candidate, apply_placement
from slim_mp.graph_pass.placement.signatures import OpSignature, OpTiming, cast_signature
from slim_mp.graph_pass.placement.target import MeasuringTarget
from slim_mp.graph_pass.refine import painted_low_ops
from slim_mp.graph_pass.region import Region
from slim_mp.graph_pass.wire_side import variable_behind


@dataclasses.dataclass(frozen=True)
class CastModel:
    """Milliseconds of a cast pair (forward cast and its gradient's) as ``fixed + per_element * n``, and
    whether the step pays the pair (``training``) or the forward cast alone (inference: half the pair),
    and whether it pays weights' casts at all (not when ``frozen_weights``: the served graph stores them low)."""

    fixed_ms: float
    per_element_ms: float
    training: bool = True
    frozen_weights: bool = False

    def ms(self, elements: int) -> float:
        """Milliseconds of a cast pair of ``elements`` values."""
        return self.fixed_ms + self.per_element_ms * elements

    def step_ms(self, elements: int) -> float:
        """Milliseconds a step pays for converting ``elements`` values: the pair, or its forward half."""
        return self.ms(elements) if self.training else self.ms(elements) / 2


def fit_cast_model(timings: Mapping[OpSignature, OpTiming], sizes: Tuple[int, int],
                   target: MeasuringTarget = MeasuringTarget()) -> CastModel:
    """The line through the two timed cast sizes (never negative), for ``target``'s kind of step."""
    small, large = (timings.get(cast_signature(n)) for n in sizes)
    fixed_ms, slope = 0.0, 0.0
    if small is not None and large is not None:
        slope = max(0.0, (large.low_ms - small.low_ms) / (sizes[1] - sizes[0]))
        fixed_ms = max(0.0, small.low_ms - slope * sizes[0])
    return CastModel(fixed_ms, slope, target.training, target.frozen_weights)


def step_words(training: bool, frozen_weights: bool = False) -> str:
    """What a timing covers, as the reasons say it: ``forward + backward`` (training) or ``forward``, and for a
    served graph's whole steps that they held the weights frozen (``MeasuringTarget.frozen_weights``)."""
    return "forward + backward" if training else "forward (frozen weights)" if frozen_weights else "forward"


class Estimator:
    """Estimated milliseconds of a step's measured part for a candidate placement (memoized); a training
    step's or an inference one's as ``casts`` says (``CastModel.training``)."""

    def __init__(self, region: Region, config: PaintConfig, timings: Dict[str, OpTiming], casts: CastModel,
                 margin: float):
        self.region, self.config, self.timings, self.casts, self.margin = region, config, timings, casts, margin
        self._memo: Dict[Candidate, Tuple[float, FrozenSet[str]]] = {}
        self.allow_ops = frozenset(op.name for op in region.ops
                                   if op.name in timings and config.classes.class_of(op.type) == "allow")

    def allow_timings(self) -> Dict[str, OpTiming]:
        """The timings of the allow ops alone: the only ops the per-op rule demotes one by one (the ops that follow
        them move as whole islands, ``follower_islands``: one alone in float32 would cost a cast on each side)."""
        return {name: timing for name, timing in self.timings.items() if name in self.allow_ops}

    @property
    def training(self) -> bool:
        """Whether the step estimated is a training step (forward + backward) or an inference one."""
        return self.casts.training

    def with_margin(self, margin: float) -> "Estimator":
        """The same estimate charging ``margin`` instead."""
        return Estimator(self.region, self.config, self.timings, self.casts, margin)

    def _stored_low(self, source: str) -> bool:
        """Whether the tensor named ``source`` is a weight the served graph stores in low precision (no cast)."""
        return self.casts.frozen_weights and variable_behind(self.region.graph.get_tensor_by_name(source)) is not None

    def __call__(self, candidate: Candidate) -> float:
        return self.painted(candidate)[0]

    def painted(self, candidate: Candidate) -> Tuple[float, FrozenSet[str]]:
        """(estimated ms, names of the low ops) of painting with ``candidate``."""
        key = Candidate(frozenset(candidate.float32_ops), candidate.tail_low)
        if key not in self._memo:
            decisions, low = painted_low_ops(self.region, apply_placement(self.config, key))
            low_names = frozenset(op.name for op in low)
            total = sum(t.charged_low_ms(self.margin) if name in low_names else t.float32_ms
                        for name, t in self.timings.items())
            ports = {op: d.ports for op, d in decisions.items()}
            pair_bytes = 4 + self.config.precision.size
            for conversion in planned_conversions(low, ports, self.config.precision):
                if conversion.kind == "cast" and conversion.bytes_per_step and not self._stored_low(conversion.source):
                    total += self.casts.step_ms(conversion.bytes_per_step // pair_bytes)
            self._memo[key] = (total, low_names)
        return self._memo[key]


def _connected(region: Region, names: Set[str]) -> List[FrozenSet[str]]:
    """The connected groups of ``names`` (through data edges between two ops of ``names``), in a stable order."""
    ops = [op for op in region.ops if op.name in names]
    parent = {op: op for op in ops}

    def root(op):
        while parent[op] is not op:
            parent[op] = parent[parent[op]]
            op = parent[op]
        return op

    for op in ops:
        for tensor in op.inputs:
            if tensor.op in parent:
                parent[root(tensor.op)] = root(op)
    groups: Dict[tf.Operation, Set[str]] = {}
    for op in ops:
        groups.setdefault(root(op), set()).add(op.name)
    return [frozenset(groups[key]) for key in sorted(groups, key=lambda r: min(groups[r]))]


def low_regions(region: Region, low_names: Set[str], timed: Set[str]) -> List[FrozenSet[str]]:
    """The timed ops (names) of each connected region of low ops (connected through data edges between low ops)."""
    return [group & timed for group in _connected(region, low_names) if group & timed]


def follower_islands(region: Region, followers: Set[str], timed: Set[str]) -> List[FrozenSet[str]]:
    """The timed ops (names) of each connected group of low ops that follow the allow ops (``followers``: a
    residual add and the Relu after it, a batch norm and its activation): the units the search may keep float32
    inside a low region, their casts counted by the estimate."""
    return [group & timed for group in _connected(region, followers) if group & timed]
