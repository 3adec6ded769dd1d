"""A time-to-accuracy run as files: top-1 against train seconds (plot), when each precision reached the target.

The target is float32's final top-1 less the equivalence margin: a precision has reached float32's
accuracy when its top-1 is within the margin of it. For each precision the table gives the first
evaluation at or above the target: its step and the lane's train seconds then (a time resolved to
the evaluation interval, an upper bound of the true crossing).
"""

import dataclasses
import os
from typing import Dict, List, Optional

from matplotlib.figure import Figure

from slim_mp.json_files import write_json_atomically
from slim_mp.markdown_table import markdown_table
from slim_mp.measure.parity.parity_plot import COLORS
from slim_mp.measure.parity.parity_report import POINTS_PER_FRACTION
from slim_mp.measure.parity.run_settings import REFERENCE_PRECISION
from slim_mp.measure.parity.time_to_accuracy import EvalPoint, LaneRecord, TimeToAccuracyResult

JSON_FILENAME = "time_to_accuracy.json"
MARKDOWN_FILENAME = "time_to_accuracy.md"
PLOT_FILENAME = "time_to_accuracy.png"


def target_accuracy(result: TimeToAccuracyResult) -> float:
    """float32's final top-1 less the equivalence margin (a fraction)."""
    margin = result.config.equivalence_margin / POINTS_PER_FRACTION
    return result.lanes[REFERENCE_PRECISION].points[-1].accuracy - margin


def first_reaching(lane: LaneRecord, target: float) -> Optional[EvalPoint]:
    """The lane's first evaluation with top-1 at or above ``target``; None if it never got there."""
    return next((point for point in lane.points if point.accuracy >= target), None)


def _row(lane: LaneRecord, target: float, reference_seconds: Optional[float]) -> List[str]:
    reached = first_reaching(lane, target)
    final = lane.points[-1]
    low = "-" if lane.low_allow_ops is None else f"{lane.low_allow_ops} of {lane.allow_ops}"
    if reached is None:
        when, speedup = "not reached", "-"
    else:
        when = f"{reached.train_seconds:.0f} s (step {reached.step})"
        speedup = "-" if reference_seconds is None else f"{reference_seconds / reached.train_seconds:.2f}x"
    return [lane.precision, f"{100 * final.accuracy:.2f}%", when, speedup,
            f"{1000 * final.train_seconds / final.step:.1f}", f"{final.train_seconds:.0f}", f"{lane.build_seconds:.0f}",
            low]


def time_to_accuracy_markdown(result: TimeToAccuracyResult) -> str:
    """``time_to_accuracy.md``: the setup, the target, and per precision when it reached the target."""
    config = result.config
    target = target_accuracy(result)
    reference = first_reaching(result.lanes[REFERENCE_PRECISION], target)
    reference_seconds = None if reference is None else reference.train_seconds
    lines = [
        f"# Time to accuracy: {config.model_name} on {config.dataset_name}, float32 vs {config.precision}",
        "",
        f"{result.device}. {config.image_size or 'default'} px, batch {config.batch_size}, {config.steps} steps "
        f"per precision in turns of {config.chunk_steps}, evaluated on the `{result.eval_split}` split every "
        f"{config.eval_every_n_steps} steps; seed {config.seed}, both from the same initial weights and batches.",
        "",
        f"Target: float32's final top-1 less {config.equivalence_margin:g} pp = {100 * target:.2f}%.",
        "",
        *markdown_table(
            ("precision", "final top-1", "reached the target after", "speed-up", "ms/step", "train s", "build s",
             "conv/matmul ops low"),
            [_row(lane, target, reference_seconds) for lane in result.lanes.values()], align="lrrrrrrr",
        ),
        "",
        "Train seconds count each precision's own steps only; build s is its graph build (with the placement's "
        "measurements), off the clock.",
        "",
        f"![top-1 against train seconds]({PLOT_FILENAME})",
        "",
    ]
    return "\n".join(lines)


def plot_time_to_accuracy(result: TimeToAccuracyResult, output_dir: str) -> str:
    """Write ``time_to_accuracy.png``: top-1 against each lane's train seconds, with the target; return its path."""
    figure = Figure(figsize=(8, 4.5), layout="constrained")
    axes = figure.subplots()
    target = target_accuracy(result)
    for precision, lane in result.lanes.items():
        seconds = [point.train_seconds for point in lane.points]
        axes.plot(seconds, [100 * point.accuracy for point in lane.points], "o-", color=COLORS[precision],
                  label=precision, markersize=3)
        reached = first_reaching(lane, target)
        if reached is not None:
            axes.axvline(reached.train_seconds, color=COLORS[precision], linestyle=":", linewidth=1)
    axes.axhline(100 * target, color="black", linestyle="--", linewidth=1,
                 label=f"target: float32 final − {result.config.equivalence_margin:g} pp")
    axes.set_xlabel("train seconds (each precision's own steps)")
    axes.set_ylabel(f"top-1 on {result.eval_split} (%)")
    axes.set_title(f"{result.config.model_name}, {result.config.image_size or 'default'} px: time to float32's "
                   f"accuracy\n{result.device}", fontsize=9)
    axes.set_xlim(left=0)
    axes.legend()
    path = os.path.join(output_dir, PLOT_FILENAME)
    figure.savefig(path, dpi=120)
    return path


def write_time_to_accuracy_reports(result: TimeToAccuracyResult, output_dir: str) -> Dict[str, str]:
    """Write the JSON record, the Markdown table and the plot into ``output_dir``; their paths by kind."""
    paths = {"json": os.path.join(output_dir, JSON_FILENAME), "markdown": os.path.join(output_dir, MARKDOWN_FILENAME)}
    write_json_atomically(paths["json"], {
        "config": dataclasses.asdict(result.config),
        "device": result.device,
        "eval_split": result.eval_split,
        "target_accuracy": target_accuracy(result),
        "lanes": {precision: dataclasses.asdict(lane) for precision, lane in result.lanes.items()},
    })
    with open(paths["markdown"], "w", encoding="utf-8") as handle:
        handle.write(time_to_accuracy_markdown(result))
    paths["plot"] = plot_time_to_accuracy(result, output_dir)
    return paths
