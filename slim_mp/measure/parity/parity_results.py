"""The records of a parity comparison: every step of a run, each trained and evaluated run, the whole result.

Plain values the runner fills and the report and plot read. ``earlier_runs`` reads them back from
the ``parity.json`` of an earlier comparison in the same ``--output_dir``, so more seeds can be
added to it (when an interval is too wide) without training the first ones again.
"""

import dataclasses
import os
from typing import Dict, List, Optional, Tuple

from slim_mp.json_files import ListOf, read_json_file
from slim_mp.measure.parity.parity_config import CONTROL_ARM, PARITY_JSON, ParityConfig
from slim_mp.measure.parity.run_settings import REFERENCE_PRECISION

_NUMBER = (int, float)
_OPTIONAL_NUMBER = (int, float, type(None))
_RUN_SCHEMA = {
    "arm": str, "seed": int, "final_loss": _NUMBER, "accuracy": _NUMBER, "eval_loss": _NUMBER,
    "initial_checkpoint": str, "checkpoint": str, "low_allow_ops": _OPTIONAL_NUMBER, "allow_ops": _OPTIONAL_NUMBER,
    "train_seconds": _OPTIONAL_NUMBER,
    "curves": {"step": ListOf(int), "loss": ListOf(_NUMBER), "loss_scale": ListOf(_NUMBER), "skipped": ListOf(int)},
}
_EARLIER_SCHEMA = {"config": dict, "eval_split": str, "runs": ListOf(_RUN_SCHEMA)}


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


def _run_record(fields: dict) -> RunRecord:
    """A ``RunRecord`` from its JSON form (``dataclasses.asdict`` plus derived fields, which are dropped)."""
    names = {field.name for field in dataclasses.fields(RunRecord)} - {"curves"}
    return RunRecord(**{name: fields[name] for name in names}, curves=StepLog(**fields["curves"]))


def earlier_runs(config: ParityConfig, split_name: str) -> List[RunRecord]:
    """The runs of an earlier comparison in ``config.output_dir`` (none if it holds no ``parity.json``).

    Raises ValueError naming the flag when that comparison was made with other settings (any flag
    but ``--seeds``) or on another split: its runs would not be comparable.
    """
    path = os.path.join(config.output_dir, PARITY_JSON)
    try:
        earlier = read_json_file(path, _EARLIER_SCHEMA)
    except FileNotFoundError:
        return []
    now = dataclasses.asdict(config)
    for name, value in sorted(now.items()):
        if name != "seeds" and earlier["config"].get(name) != value:
            raise ValueError(f"--output_dir={config.output_dir} holds a comparison made with --{name}="
                             f"{earlier['config'].get(name)} (now {value}); pass the same flags to add --seeds to it, "
                             "or a new --output_dir.")
    if earlier["eval_split"] != split_name:
        raise ValueError(f"--output_dir={config.output_dir} holds a comparison evaluated on the "
                         f"'{earlier['eval_split']}' split (now '{split_name}'); pass --eval_split_name="
                         f"{earlier['eval_split']}, or a new --output_dir.")
    return [_run_record(run) for run in earlier["runs"]]
