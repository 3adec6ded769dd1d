"""The placement's decision as the rest of slim_mp sees it: ``PlacementPlan`` (``RewriteReport.placement``)."""

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

from slim_mp.graph_pass.gradient_kernels import GradientKernels
from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement.candidate import Candidate, apply_placement
from slim_mp.graph_pass.placement.options import Placement
from slim_mp.graph_pass.placement.step_check import StepCheck


@dataclasses.dataclass(frozen=True)
class PlacementPlan:
    """The decision: timed ops kept in float32 (op name -> reason) and what it was based on.

    ``source``: ``measured``, ``reused from <decisions file>``, ``fixed timings from <file>`` or, when
    ``timed`` is False, why nothing was timed (the static painting applies). ``candidates``: every
    placement compared, with its estimate and timed step. ``check``: the whole-step check of the
    choice against all float32 and the static placement (``step_check``); None when it did not
    apply (nothing lowered, nothing timed: fixed timings, ``time_steps`` off, a reused decision
    records the check it was made with). ``gradient_kernels``: the low ops whose gradients do not all
    run in the low type and their kernels (``GradientKernels``), with the sentence saying why per op
    in ``gradient_reasons`` (``kernel_choice``). ``timed_step``: what was timed,
    ``forward + backward`` (a training step) or ``forward`` (evaluation, export: ``MeasuringTarget.training``).
    ``timed_batches``: the batches an inference graph whose batch is unknown was timed at
    (``served_batches``); () when the graph's own shapes were.
    """

    float32_ops: Dict[str, str]
    low_ops: List[str]
    tail_low: bool = False
    estimated_ms: Optional[float] = None
    static_estimated_ms: Optional[float] = None
    float32_estimated_ms: Optional[float] = None
    measured_signatures: int = 0
    cached_signatures: int = 0
    candidates: List[Candidate] = dataclasses.field(default_factory=list)
    check: Optional[StepCheck] = None
    seconds: float = 0.0
    source: str = Placement.MEASURED.value
    timed: bool = True
    gradient_kernels: GradientKernels = GradientKernels()
    gradient_reasons: Dict[str, str] = dataclasses.field(default_factory=dict)
    timed_step: str = "forward + backward"
    timed_batches: Tuple[int, ...] = ()

    def chosen(self) -> Candidate:
        """The decision as a candidate, its reasons those recorded when it was made."""
        return Candidate(frozenset(self.float32_ops), self.tail_low, reasons=dict(self.float32_ops))

    def applied(self, config: PaintConfig) -> PaintConfig:
        """``config`` painting as this plan decided: its float32 ops and tail (``apply_placement``)."""
        return apply_placement(config, self.chosen())

    def as_json(self) -> dict:
        """The plan as plain JSON values."""
        content = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        content["float32_ops"] = dict(sorted(self.float32_ops.items()))
        chosen = self.chosen()
        content["candidates"] = [c.as_json(chosen=c == chosen) for c in self.candidates]
        content["check"] = self.check.as_json() if self.check else None
        content["gradient_kernels"] = self.gradient_kernels.as_json()
        return content


def emulated_placement(emulation: str) -> PlacementPlan:
    """The plan for a precision the device only emulates (float16 on a CPU): the static painting, nothing timed.

    Emulated kernels are always slower, so timing would keep every op float32 and hide the precision's
    numerics; the static painting runs them (slowly), so float16 can be checked on a CPU before a GPU run.
    """
    return PlacementPlan(float32_ops={}, low_ops=[], timed=False, source=(
        f"static painting, not timed: {emulation.rstrip('.')}; timing would keep every op float32, so the "
        "precision runs emulated for its numerics"))


def untimed_placement(why: str, static_low: Sequence[str], emulated: str, timed_step: str) -> PlacementPlan:
    """The plan when nothing could be timed (``why``): the static painting where the precision is native, else
    (``emulated``: "bfloat16 is emulated: <why>") every op the static lists make low (``static_low``) kept
    float32. Emulated kernels are mostly slower than float32, so without a timing that says otherwise the low
    precision would only make the step slower; the static placement is the way to force it.
    """
    if not emulated or not static_low:
        return PlacementPlan(float32_ops={}, low_ops=[], timed=False, timed_step=timed_step,
                             source=f"static painting, nothing timed: {why}")
    return PlacementPlan(float32_ops={name: f"not timed ({why}) and {emulated}" for name in sorted(static_low)},
                         low_ops=[], timed=False, timed_step=timed_step, source=(
                             f"every op kept float32, nothing timed: {why}; {emulated}, and emulated kernels are "
                             "slower than float32 unless timed faster"))
