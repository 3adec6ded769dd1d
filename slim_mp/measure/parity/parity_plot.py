"""The picture of a parity comparison: training loss per step of both precisions, and float16's loss scale.

Drawn on a plain ``matplotlib.figure.Figure`` (Agg canvas), so no display and no global pyplot
state are needed.
"""

import os

import numpy as np
from matplotlib.figure import Figure

from slim_mp.measure.parity.parity_config import CONTROL_ARM
from slim_mp.measure.parity.parity_results import ParityResult

PLOT_FILENAME = "loss_curves.png"
COLORS = {"float32": "tab:blue", "bfloat16": "tab:orange", "float16": "tab:green", CONTROL_ARM: "tab:gray"}


def _draw_losses(axes, result: ParityResult) -> None:
    """Loss per global step (applied steps only): each run thin and faint, the mean over seeds bold."""
    for run in result.runs:
        axes.plot(*run.curves.applied(), color=COLORS[run.arm], alpha=0.3, linewidth=0.7)
    for arm in result.config.arms:
        curves = [run.curves.applied() for run in result.runs_of(arm)]
        mean_loss = np.mean([losses for _, losses in curves], axis=0)
        axes.plot(curves[0][0], mean_loss, color=COLORS[arm], linewidth=1.8,
                  label=f"{arm} (mean of {len(curves)} seeds)")
    axes.set_ylabel("training loss")
    axes.legend()


def _draw_loss_scale(axes, result: ParityResult) -> None:
    """The loss scale after each step of every float16 run (log scale); a cross marks each skipped step."""
    for run in result.runs_of(result.config.precision):
        steps, scales = np.array(run.curves.step), np.array(run.curves.loss_scale)
        line, = axes.plot(steps, scales, linewidth=1.0, label=f"seed {run.seed}")
        skipped = np.diff(run.curves.skipped, prepend=0) > 0  # the counter starts at 0 with each run
        axes.plot(steps[skipped], scales[skipped], "x", color=line.get_color())
    axes.set_yscale("log", base=2)
    axes.set_ylabel("loss scale (x: skipped step)")
    axes.legend()


def plot_loss_curves(result: ParityResult, output_dir: str) -> str:
    """Write ``loss_curves.png`` into ``output_dir`` (a loss-scale panel below for float16); return its path."""
    config = result.config
    with_scale = config.precision == "float16"
    figure = Figure(figsize=(8, 7 if with_scale else 4.5), layout="constrained")
    panels = figure.subplots(2 if with_scale else 1, 1, sharex=True, squeeze=False)[:, 0]
    _draw_losses(panels[0], result)
    panels[0].set_title(f"{config.model_name} on {config.dataset_name}: float32 vs {config.precision}, "
                        f"batch {config.batch_size}")
    if with_scale:
        _draw_loss_scale(panels[1], result)
    panels[-1].set_xlabel("step")
    path = os.path.join(output_dir, PLOT_FILENAME)
    figure.savefig(path, dpi=120)
    return path
