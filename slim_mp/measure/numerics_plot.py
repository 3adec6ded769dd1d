"""Pictures of the numerics tools: log2-magnitude histograms against a type's range, and per-layer error.

Drawn on a plain ``matplotlib.figure.Figure`` (Agg canvas): no display, no global pyplot state.
"""

import math

import numpy as np
from matplotlib.figure import Figure

from slim_mp.numerics import AuditResult, LOG2_LOW, LayerDiff


def _draw_histogram(axes, counts: np.ndarray, result: AuditResult, label: str, loss_scale=None) -> None:
    """Bars of element counts per power of two (zeros left out), the representable range shaded."""
    exponents = np.arange(LOG2_LOW, LOG2_LOW + len(counts))[1:]
    values = np.asarray(counts[1:], np.float64)
    total = values.sum()
    low, high = result.limits.log2_min_subnormal, math.log2(result.limits.max_finite)
    axes.axvspan(low, high, color="tab:green", alpha=0.12, label=f"{result.precision} representable")
    axes.axvline(low, color="tab:red", linewidth=1)
    axes.axvline(high, color="tab:red", linewidth=1)
    if total:
        shown = values > 0
        axes.bar(exponents[shown], values[shown] / total, width=1.0, align="edge", color="tab:blue")
        used = exponents[shown]
        axes.set_xlim(min(used.min(), low) - 4, max(used.max(), high) + 4)
    if loss_scale:
        shifted = low - math.log2(loss_scale)
        axes.axvline(shifted, color="tab:purple", linestyle="--", linewidth=1.2,
                     label=f"flush-to-zero edge with loss scale {loss_scale:g}")
    axes.set_yscale("log")
    axes.set_ylabel("fraction of non-zero elements")
    axes.set_title(label)
    axes.text(0.01, 0.95, "flush to zero <-", transform=axes.transAxes, va="top", fontsize=8, color="tab:red")
    axes.text(0.99, 0.95, "-> overflow", transform=axes.transAxes, va="top", ha="right", fontsize=8,
              color="tab:red")
    axes.legend(loc="best", fontsize=8)


def plot_audit(result: AuditResult, path: str, title: str) -> str:
    """Write the activation and activation-gradient histograms (log2 |x|) with the type's range; return ``path``."""
    figure = Figure(figsize=(9, 6.5), layout="constrained")
    top, bottom = figure.subplots(2, 1)
    _draw_histogram(top, result.activation_histogram, result, "activations of the ops the pass would lower")
    _draw_histogram(bottom, result.gradient_histogram, result, "loss gradients of those activations (unscaled)",
                    loss_scale=result.recommendation.initial_loss_scale)
    bottom.set_xlabel("log2 |x|")
    figure.suptitle(title)
    figure.savefig(path, dpi=110)
    return path


def plot_layer_diff(diff: LayerDiff, path: str, title: str) -> str:
    """Write the relative error per end point, in network order (log scale; non-finite ones marked); return ``path``."""
    names = [layer.name for layer in diff.layers]
    errors = np.array([layer.relative_error for layer in diff.layers], np.float64)
    finite = np.isfinite(errors)
    floor = errors[finite & (errors > 0)].min() if (finite & (errors > 0)).any() else 1e-8
    figure = Figure(figsize=(max(6, 0.28 * len(names) + 2), 4.5), layout="constrained")
    axes = figure.subplots()
    positions = np.arange(len(names))
    axes.plot(positions[finite], np.maximum(errors[finite], floor / 10), "o-", color="tab:orange",
              label=f"{diff.precision} vs float32")
    if (~finite).any():
        axes.plot(positions[~finite], np.full((~finite).sum(), floor), "x", color="tab:red", label="inf/NaN")
    axes.set_yscale("log")
    axes.set_xticks(positions)
    axes.set_xticklabels(names, rotation=90, fontsize=7)
    axes.set_ylabel("||low - fp32|| / ||fp32||")
    axes.set_title(title, fontsize=9)
    axes.legend()
    figure.savefig(path, dpi=110)
    return path
