"""One placement the search compares, with the reasons recorded when it was made, how to apply it,
and the two reference placements every decision is measured against (static and all float32)."""

import dataclasses
from typing import FrozenSet, Iterable, Mapping, Optional, Tuple

from slim_mp.graph_pass.paint import PaintConfig

# The reason a candidate's demoted ops carry until the search has decided on it.
UNDECIDED = "placement candidate"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A placement: the timed ops (by name) kept float32, and whether the tail after the last allow op stays low.

    Two candidates are equal when they paint the same (``float32_ops``, ``tail_low``); the other fields
    say what is known about it: ``found_as``, how the search found it; ``reasons``, per demoted op,
    why (recorded by the rule that demoted it); ``estimated_ms`` and ``step_ms``, its estimate and its
    timed whole step (None until timed); ``step_noise``, the noise of comparing that step with the
    all-float32 step timed in the same rounds, or with the first of its batch when float32 was not
    timed (``slim_mp.timing.relative_noise``).
    """

    float32_ops: FrozenSet[str]
    tail_low: bool = False
    found_as: Tuple[str, ...] = dataclasses.field(default=(), compare=False)
    reasons: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)
    estimated_ms: Optional[float] = dataclasses.field(default=None, compare=False)
    step_ms: Optional[float] = dataclasses.field(default=None, compare=False)
    step_noise: float = dataclasses.field(default=0.0, compare=False)

    def reason(self, name: str) -> str:
        """Why ``name`` is kept float32 in this candidate."""
        return self.reasons.get(name, UNDECIDED)

    def as_json(self, chosen: bool) -> dict:
        """What the report lists per compared candidate."""
        return {"found_as": ", ".join(self.found_as), "float32_ops": len(self.float32_ops),
                "tail_low": self.tail_low,
                "estimated_ms": None if self.estimated_ms is None else round(self.estimated_ms, 3),
                "step_ms": None if self.step_ms is None else round(self.step_ms, 3),
                "step_noise": round(self.step_noise, 4), "chosen": chosen}


def static_candidate() -> Candidate:
    """The static placement: no allow op kept float32 (the painting tables alone)."""
    return Candidate(frozenset(), found_as=("static",))


def all_float32_candidate(timed_ops: Iterable[str]) -> Candidate:
    """The all-float32 placement: every timed allow op (``timed_ops``, names) kept float32."""
    return Candidate(frozenset(timed_ops), found_as=("all float32",))


def lowered_ops(candidate: Candidate, timed_ops: Iterable[str]) -> FrozenSet[str]:
    """The timed ops (names) ``candidate`` runs low; empty: it lowers nothing (it is all float32)."""
    return frozenset(timed_ops) - candidate.float32_ops


def apply_placement(config: PaintConfig, candidate: Candidate) -> PaintConfig:
    """``config`` with ``candidate``'s ops fixed float32 (with their reasons) and its tail choice."""
    fixed = dict(config.fixed_float32)
    fixed.update({name: candidate.reason(name) for name in candidate.float32_ops})
    return dataclasses.replace(config, fixed_float32=fixed, demote_tail=not candidate.tail_low)
