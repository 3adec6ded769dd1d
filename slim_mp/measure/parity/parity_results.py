"""The records of a parity comparison: every step of a run, each trained and evaluated run, the whole result.

Plain values the runner fills and the report and plot read.
"""

import dataclasses
from typing import Dict, List, Optional, Tuple

from slim_mp.measure.parity.parity_config import CONTROL_ARM, ParityConfig
from slim_mp.measure.parity.run_settings import REFERENCE_PRECISION


@dataclasses.dataclass
class StepLog:
    """What every train step of one run reported: global step, loss, loss scale and skipped-step count after it.

    A step skipped for non-finite float16 gradients is recorded too: it raises ``skipped`` and
    leaves the global step where it was, so a run has ``steps + skipped`` entries.
    """

    step: List[int] = dataclasses.field(default_factory=list)
    loss: List[float] = dataclasses.field(default_factory=list)
    loss_scale: List[float] = dataclasses.field(default_factory=list)
    skipped: List[int] = dataclasses.field(default_factory=list)

    def record(self, values: Dict[str, float]) -> None:
        """Append one step's progress values (the training loop's ``on_step`` callback)."""
        self.step.append(int(values["step"]))
        self.loss.append(float(values["loss"]))
        self.loss_scale.append(float(values["loss_scale"]))
        self.skipped.append(int(values["skipped"]))

    def applied(self) -> Tuple[List[int], List[float]]:
        """Global step and loss of the steps whose update was applied (one per global step, skipped ones left out)."""
        steps, losses, skipped_before = [], [], 0
        for step, loss, skipped in zip(self.step, self.loss, self.skipped):
            if skipped == skipped_before:
                steps.append(step)
                losses.append(loss)
            skipped_before = skipped
        return steps, losses


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """One trained and evaluated run: its arm and seed, end results, and per-step curves.

    ``arm``: the precision it trained in, or ``CONTROL_ARM`` (float32 from perturbed initial weights).
    ``low_allow_ops`` of ``allow_ops``: the conv/matmul-class (allow list) ops the graph pass ran
    low in a mixed-precision run, from its rewrite report (None for float32), so a reader sees
    whether the comparison lowered anything (a measured placement may keep them all float32).
    ``train_seconds``: the wall time of its training (graph build and steps; evaluation excluded).
    """

    arm: str
    seed: int
    final_loss: float
    accuracy: float
    eval_loss: float
    initial_checkpoint: str
    checkpoint: str
    curves: StepLog
    low_allow_ops: Optional[int] = None
    allow_ops: Optional[int] = None
    train_seconds: Optional[float] = None

    @property
    def precision(self) -> str:
        """The precision the run trained in (float32 for the control)."""
        return REFERENCE_PRECISION if self.arm == CONTROL_ARM else self.arm

    @property
    def skipped_steps(self) -> int:
        """Steps whose update was skipped for non-finite gradients (the counter's value after the last step)."""
        return self.curves.skipped[-1]


@dataclasses.dataclass(frozen=True)
class ParityResult:
    """A finished comparison: its options, the split it was evaluated on, and every run (seed-major)."""

    config: ParityConfig
    eval_split: str
    runs: List[RunRecord]

    def runs_of(self, arm: str) -> List[RunRecord]:
        """The runs of one arm (a precision, or the control), in seed order."""
        return [run for run in self.runs if run.arm == arm]
