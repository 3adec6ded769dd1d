"""A parity comparison as files: mean ± std per arm, the paired gaps with their verdicts, JSON, Markdown, the plot.

The paired gaps (top-1 in percentage points, per seed against the float32 run) are the mixed
precision's and the control's, each with its 95% interval and equivalence verdict
(``paired_stats``). Each mixed-precision run also says how many conv/matmul-class (allow list) ops
the graph pass ran low, so a reader sees whether the comparison lowered anything at all.
"""

import dataclasses
import os
import statistics
from typing import Dict, List, Optional, Sequence

from slim_mp.json_files import write_json_atomically
from slim_mp.markdown_table import markdown_table
from slim_mp.measure.parity.paired_stats import CONFIDENCE, PairedGap, paired_gap
from slim_mp.measure.parity.parity_config import CONTROL_ARM, CONTROL_PERTURBATION, PARITY_JSON
from slim_mp.measure.parity.parity_plot import PLOT_FILENAME, plot_loss_curves
from slim_mp.measure.parity.parity_results import ParityResult, RunRecord
from slim_mp.measure.parity.run_configs import END_LEARNING_RATE_FRACTION, MOMENTUM
from slim_mp.measure.parity.run_settings import REFERENCE_PRECISION

MARKDOWN_FILENAME = "parity.md"
METRICS = ("accuracy", "final_loss", "eval_loss")
STD_DEFINITION = "sample standard deviation over seeds (n - 1 in the denominator)"
POINTS_PER_FRACTION = 100


@dataclasses.dataclass(frozen=True)
class Spread:
    """The mean and sample standard deviation of one metric over seeds (std None for a single seed)."""

    mean: float
    std: Optional[float]

    def text(self) -> str:
        """``0.8123 ± 0.0040``, or just the mean for one seed."""
        return f"{self.mean:.4f}" if self.std is None else f"{self.mean:.4f} ± {self.std:.4f}"


def spread(values: Sequence[float]) -> Spread:
    """Mean and sample standard deviation of ``values`` (at least one)."""
    return Spread(statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None)


def summarize(result: ParityResult) -> Dict[str, Dict[str, Spread]]:
    """Per arm, the spread of each metric in ``METRICS`` over the seeds."""
    return {
        arm: {metric: spread([getattr(run, metric) for run in result.runs_of(arm)]) for metric in METRICS}
        for arm in result.config.arms
    }


def gap_points(result: ParityResult, arm: str) -> PairedGap:
    """Top-1 of ``arm`` minus that of the float32 run of the same seed, in percentage points, against the margin."""
    reference = {run.seed: run.accuracy for run in result.runs_of(REFERENCE_PRECISION)}
    gaps = [POINTS_PER_FRACTION * (run.accuracy - reference[run.seed]) for run in result.runs_of(arm)]
    return paired_gap(gaps, result.config.equivalence_margin)


def gaps(result: ParityResult) -> Dict[str, PairedGap]:
    """The paired gap of every arm but float32: the mixed precision's, then the control's when it ran."""
    return {arm: gap_points(result, arm) for arm in result.config.arms if arm != REFERENCE_PRECISION}


def _interval_text(gap: PairedGap) -> str:
    return "-" if gap.low is None else f"[{gap.low:+.2f}, {gap.high:+.2f}]"


def _gap_row(arm: str, gap: PairedGap) -> List[str]:
    std = "-" if gap.std is None else f"{gap.std:.2f}"
    p_value = "-" if gap.tost_p is None else f"{gap.tost_p:.3g}"
    return [f"{arm} − float32", str(gap.n), f"{gap.mean:+.2f}", std, _interval_text(gap), p_value, gap.verdict]


def _json(result: ParityResult) -> dict:
    """Everything ``parity.json`` holds: options, summary, paired gaps and every run with its curves."""
    return {
        "config": dataclasses.asdict(result.config),
        "eval_split": result.eval_split,
        "arms": list(result.config.arms),
        "batch_norm_decay": result.config.effective_batch_norm_decay,
        "std": f"{STD_DEFINITION}; null for a single seed",
        "summary": {
            arm: {metric: dataclasses.asdict(value) for metric, value in metrics.items()}
            for arm, metrics in summarize(result).items()
        },
        "gaps_points": {arm: dataclasses.asdict(gap) for arm, gap in gaps(result).items()},
        "runs": [dict(dataclasses.asdict(run), precision=run.precision, skipped_steps=run.skipped_steps)
                 for run in result.runs],
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


def _setup_text(result: ParityResult) -> str:
    config = result.config
    decay = config.effective_batch_norm_decay
    control = (f" The control `{CONTROL_ARM}` trains float32 from the same weights times "
               f"(1 + {CONTROL_PERTURBATION:g}·N(0,1)): how far float32 moves from itself." if config.control else "")
    return (f"float32 vs {config.precision}: {config.steps} steps, batch {config.batch_size}, momentum {MOMENTUM:g}, "
            f"learning rate {config.learning_rate:g} falling linearly to {END_LEARNING_RATE_FRACTION:.0%} of it, "
            f"batch-norm decay {'- (no batch norm)' if decay is None else f'{decay:g}'}, "
            f"seeds {', '.join(str(seed) for seed in config.seeds)}. Per seed, every arm starts from the same float32 "
            f"initial checkpoint and reads the same batches; top-1 and eval loss are measured on the "
            f"`{result.eval_split}` split, final loss is the last training step's total loss.{control}")


def _markdown(result: ParityResult) -> str:
    """The summary table (mean ± std per arm), the paired gaps with their verdicts and a per-seed table."""
    config = result.config
    summary = summarize(result)
    lines = [
        f"# Accuracy parity: {config.model_name} on {config.dataset_name}",
        "",
        _setup_text(result),
        "",
        *markdown_table(
            ("arm", "top-1", "final loss", "eval loss"),
            [(arm, *(summary[arm][metric].text() for metric in METRICS)) for arm in summary],
        ),
        "",
        f"± is the {STD_DEFINITION}.",
        "",
        "## Paired gaps",
        "",
        *markdown_table(
            ("top-1 gap (pp)", "seeds", "mean", "std", f"{CONFIDENCE:.0%} interval", "TOST p", "verdict"),
            [_gap_row(arm, gap) for arm, gap in gaps(result).items()], align="lrrrrrl",
        ),
        "",
        f"Paired by seed; the interval is the paired t interval (n − 1 degrees of freedom). Equivalent: the "
        f"interval lies inside ±{config.equivalence_margin:g} pp (two one-sided t tests, each at "
        f"{(1 - CONFIDENCE) / 2:.1%}: TOST p < {(1 - CONFIDENCE) / 2:g}); not equivalent: it lies wholly outside; "
        "inconclusive: neither, more seeds would tell.",
        "",
        "## Per seed",
        "",
        *markdown_table(
            ("seed", "arm", "top-1", "final loss", "eval loss", "skipped steps", "final loss scale",
             "conv/matmul ops low", "train s"),
            [(str(run.seed), run.arm, f"{run.accuracy:.4f}", f"{run.final_loss:.4f}", f"{run.eval_loss:.4f}",
              str(run.skipped_steps), f"{run.curves.loss_scale[-1]:g}", _lowered_cell(run),
              "-" if run.train_seconds is None else f"{run.train_seconds:.0f}") for run in result.runs],
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
        """Everything ``parity.json`` holds: options, summary, paired gaps and every run with its curves."""
        return _json(self.result)

    def to_markdown(self) -> str:
        """``parity.md``: the summary table, the paired gaps with their verdicts and a per-seed table."""
        return _markdown(self.result)

    def write_reports(self, output_dir: str) -> Dict[str, str]:
        """Write ``parity.json``, ``parity.md`` and ``loss_curves.png`` into ``output_dir``; their paths by kind."""
        paths = {"json": os.path.join(output_dir, PARITY_JSON),
                 "markdown": os.path.join(output_dir, MARKDOWN_FILENAME)}
        write_json_atomically(paths["json"], self.to_dict())
        with open(paths["markdown"], "w", encoding="utf-8") as handle:
            handle.write(self.to_markdown())
        paths["plot"] = plot_loss_curves(self.result, output_dir)
        return paths
