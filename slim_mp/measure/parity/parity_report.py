"""A parity comparison as files: mean ± std per precision, the full JSON record, Markdown tables and the plot.

Each mixed-precision run also says how many conv/matmul-class (allow list) ops the graph pass ran
low, so a reader sees whether the comparison lowered anything at all.
"""

import dataclasses
import os
import statistics
from typing import Dict, List, Optional, Sequence

from slim_mp.json_files import write_json_atomically
from slim_mp.markdown_table import markdown_table
from slim_mp.measure.parity.parity_config import REFERENCE_PRECISION
from slim_mp.measure.parity.parity_plot import PLOT_FILENAME, plot_loss_curves
from slim_mp.measure.parity.parity_results import ParityResult, RunRecord
from slim_mp.measure.parity.parity_run import END_LEARNING_RATE_FRACTION, MOMENTUM

JSON_FILENAME = "parity.json"
MARKDOWN_FILENAME = "parity.md"
METRICS = ("accuracy", "final_loss", "eval_loss")
STD_DEFINITION = "sample standard deviation over seeds (n - 1 in the denominator)"


@dataclasses.dataclass(frozen=True)
class Spread:
    """The mean and sample standard deviation of one metric over seeds (std None for a single seed)."""

    mean: float
    std: Optional[float]

    def text(self) -> str:
        """``0.8123 ± 0.0040``, or just the mean for one seed."""
        return f"{self.mean:.4f}" if self.std is None else f"{self.mean:.4f} ± {self.std:.4f}"

    def points_text(self) -> str:
        """A difference of fractions in percentage points, signed: ``+0.28 ± 0.40 pp``."""
        mean = f"{100 * self.mean:+.2f}"
        return f"{mean} pp" if self.std is None else f"{mean} ± {100 * self.std:.2f} pp"


def spread(values: Sequence[float]) -> Spread:
    """Mean and sample standard deviation of ``values`` (at least one)."""
    return Spread(statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None)


def summarize(result: ParityResult) -> Dict[str, Dict[str, Spread]]:
    """Per precision, the spread of each metric in ``METRICS`` over the seeds."""
    return {
        precision: {metric: spread([getattr(run, metric) for run in result.runs_of(precision)]) for metric in METRICS}
        for precision in result.config.precisions
    }


def accuracy_difference(result: ParityResult) -> Spread:
    """Top-1 of the mixed-precision run minus that of the float32 run, paired by seed."""
    reference = {run.seed: run.accuracy for run in result.runs_of(REFERENCE_PRECISION)}
    return spread([run.accuracy - reference[run.seed] for run in result.runs_of(result.config.precision)])


def _json(result: ParityResult) -> dict:
    """Everything ``parity.json`` holds: options, summary, paired difference and every run with its curves."""
    return {
        "config": dataclasses.asdict(result.config),
        "eval_split": result.eval_split,
        "precisions": list(result.config.precisions),
        "std": f"{STD_DEFINITION}; null for a single seed",
        "summary": {
            precision: {metric: dataclasses.asdict(value) for metric, value in metrics.items()}
            for precision, metrics in summarize(result).items()
        },
        "accuracy_difference": dataclasses.asdict(accuracy_difference(result)),
        "runs": [dict(dataclasses.asdict(run), skipped_steps=run.skipped_steps) for run in result.runs],
    }


def _lowered_cell(run: RunRecord) -> str:
    return "-" if run.low_allow_ops is None else f"{run.low_allow_ops} of {run.allow_ops}"


def _nothing_lowered(result: ParityResult) -> List[str]:
    """A warning line when some mixed-precision run ran no conv/matmul-class op low (else nothing)."""
    seeds = [str(run.seed) for run in result.runs_of(result.config.precision) if run.low_allow_ops == 0]
    if not seeds:
        return []
    return [f"Warning: the {result.config.precision} run of seed(s) {', '.join(seeds)} ran no conv/matmul-class op "
            "low (the placement kept them float32): there it compares float32 with float32.", ""]


def _markdown(result: ParityResult) -> str:
    """The summary table (mean ± std per precision), the paired top-1 difference and a per-seed table."""
    config = result.config
    summary = summarize(result)
    seeds = ", ".join(str(seed) for seed in config.seeds)
    lines = [
        f"# Accuracy parity: {config.model_name} on {config.dataset_name}",
        "",
        f"float32 vs {config.precision}: {config.steps} steps, batch {config.batch_size}, momentum {MOMENTUM:g}, "
        f"learning rate {config.learning_rate:g} falling linearly to {END_LEARNING_RATE_FRACTION:.0%} of it, "
        f"seeds {seeds}. Per seed, both precisions start from the same float32 "
        f"initial checkpoint and read the same batches; top-1 and eval loss are measured on the "
        f"`{result.eval_split}` split, final loss is the last training step's total loss.",
        "",
        *markdown_table(
            ("precision", "top-1", "final loss", "eval loss"),
            [(precision, *(summary[precision][metric].text() for metric in METRICS)) for precision in summary],
        ),
        "",
        f"Top-1 difference, {config.precision} − float32, paired by seed: {accuracy_difference(result).text()} "
        f"({accuracy_difference(result).points_text()}).",
        f"± is the {STD_DEFINITION}.",
        "",
        "## Per seed",
        "",
        *markdown_table(
            ("seed", "precision", "top-1", "final loss", "eval loss", "skipped steps", "final loss scale",
             "conv/matmul ops low"),
            [(str(run.seed), run.precision, f"{run.accuracy:.4f}", f"{run.final_loss:.4f}", f"{run.eval_loss:.4f}",
              str(run.skipped_steps), f"{run.curves.loss_scale[-1]:g}", _lowered_cell(run)) for run in result.runs],
        ),
        "",
        *_nothing_lowered(result),
        f"![training loss per step]({PLOT_FILENAME})",
        "",
    ]
    return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class ParityReport:
    """The report of one ``ParityResult``: the report verbs every tool of ``slim_mp.measure`` shares."""

    result: ParityResult

    def to_dict(self) -> dict:
        """Everything ``parity.json`` holds: options, summary, paired difference and every run with its curves."""
        return _json(self.result)

    def to_markdown(self) -> str:
        """``parity.md``: the summary table, the paired top-1 difference and a per-seed table."""
        return _markdown(self.result)

    def write_reports(self, output_dir: str) -> Dict[str, str]:
        """Write ``parity.json``, ``parity.md`` and ``loss_curves.png`` into ``output_dir``; their paths by kind."""
        paths = {"json": os.path.join(output_dir, JSON_FILENAME),
                 "markdown": os.path.join(output_dir, MARKDOWN_FILENAME)}
        write_json_atomically(paths["json"], self.to_dict())
        with open(paths["markdown"], "w", encoding="utf-8") as handle:
            handle.write(self.to_markdown())
        paths["plot"] = plot_loss_curves(self.result, output_dir)
        return paths
