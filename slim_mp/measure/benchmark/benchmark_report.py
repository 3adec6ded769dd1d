"""Write a benchmark suite's results as ``benchmark.json``, ``benchmark.md`` and ``benchmark.png``.

The JSON keeps every measurement (per-round step times included); the markdown table has one row
per (model, configuration), "n/a" with the reason for one that could not be built or run; the bar
chart shows each measured configuration's speed-up over float32. A run under a background load
adds, per measured placement, what was decided under the load and its quiet re-timing beside float32;
a memory budget adds the largest batch within it per (model, configuration).
"""

import dataclasses
import os
from typing import Callable, Dict, List, Optional, Tuple

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from slim_mp.json_files import write_json_atomically
from slim_mp.markdown_table import markdown_row, markdown_table
from slim_mp.measure.benchmark.batch_budget import MIB
from slim_mp.measure.benchmark.suite_results import BASELINE, BatchFit, QuietRetiming, SuiteRun, VariantResult

TABLE_HEADER = ("model", "config", "precision", "ms/step (median)", "images/s", "speed-up vs fp32",
                "peak memory (MiB)", "above baseline (MiB)", "casts run", "casts in graph", "pass (s) cold / warm")
TABLE_ALIGN = "lll" + "r" * 8
LOAD_HEADER = ("model", "config", "decided under load: allow ops float32 / low", "whole-step check",
               "slim_mp/float32 under load", "quiet float32 ms", "quiet slim_mp ms", "slim_mp/float32 quiet")
LOAD_ALIGN = "llrlrrrr"
BUDGET_HEADER = ("model", "config", "largest batch", "its peak above baseline (MiB)", "next batch measured",
                 "its peak above baseline (MiB)", "batches measured")
BUDGET_ALIGN = "llrrrrl"
FUSION_HEADER = ("model", "config", "fused kernels run (nodes)", "fewer than float32")
FUSION_ALIGN = "llll"


def _memory_methods(run: SuiteRun) -> List[str]:
    return sorted({result.memory_method for result in run.results if result.memory_method})


def _precision_cell(result: VariantResult) -> str:
    return result.precision if result.native else f"{result.precision} (emulated)"


def _table_cells(result: VariantResult) -> tuple:
    if result.unavailable:
        return (result.model, result.label, _precision_cell(result), f"n/a: {result.unavailable}",
                *("-" for _ in range(7)))
    pass_time = "-"
    if result.pass_seconds is not None:
        pass_time = f"{_number(result.cold_pass_seconds, '{:.2f}')} / {result.pass_seconds:.2f}"
    return (result.model, result.label, _precision_cell(result), f"{result.median_seconds * 1000:.1f}",
            f"{result.images_per_second:.1f}", f"{result.speedup_vs_float32:.2f}x",
            f"{result.peak_memory_bytes / MIB:.1f}",
            f"{(result.peak_memory_bytes - result.baseline_memory_bytes) / MIB:.1f}",
            str(result.casts_executed), str(result.casts_in_graph), pass_time)


def _number(value, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def load_row(retiming: QuietRetiming) -> str:
    """One row of the load table: the decision made under load and its quiet re-timing."""
    if retiming.unavailable:
        cells = (retiming.model, retiming.label, f"n/a: {retiming.unavailable}", *("-" for _ in range(5)))
    else:
        cells = (retiming.model, retiming.label, f"{retiming.float32_ops} / {retiming.low_ops}",
                 retiming.check or "-", _number(retiming.loaded_ratio, "{:.3f}"),
                 _number(retiming.quiet_float32_ms, "{:.1f}"), _number(retiming.quiet_slim_mp_ms, "{:.1f}"),
                 _number(retiming.quiet_ratio, "{:.3f}"))
    return markdown_row(cells)


def _load_section(run: SuiteRun) -> List[str]:
    """The markdown on the background load: how it ran and the decided-under-load / quiet table."""
    if not run.background_load:
        return []
    return [
        "", "## Decided under load, re-timed quiet", "",
        f"Everything above ran beside {run.background_load} busy-loop process(es) (one per core, pinned), the "
        "measured placement deciding (and pinning) its choice under that load. Then the load was stopped and "
        f"float32 and each pinned placement were re-timed side by side, {run.settings.rounds} interleaved rounds. "
        "slim_mp/float32: median over rounds of the placement's step time divided by float32's in the same round "
        "(below 1 is faster).", "", *markdown_table(LOAD_HEADER, [], LOAD_ALIGN),
        *(load_row(r) for r in run.quiet_retimings),
    ]


def _mib(value: Optional[int]) -> str:
    return _number(None if value is None else value / MIB, "{:.1f}")


def budget_row(fit: BatchFit) -> str:
    """One row of the memory-budget table: the largest batch that fit, the next one measured, all batches tried."""
    if fit.unavailable:
        return markdown_row((fit.model, fit.label, f"n/a: {fit.unavailable}", *("-" for _ in range(4))))
    largest = "none (batch 1 is over)" if fit.largest_batch is None else str(fit.largest_batch)
    if fit.largest_batch == fit.max_batch:
        largest = f"{largest} (the search's limit)"
    return markdown_row((fit.model, fit.label, largest, _mib(fit.peak_of(fit.largest_batch)),
                         _number(fit.first_over, "{}"), _mib(fit.peak_of(fit.first_over)),
                         ", ".join(str(batch) for batch, _ in fit.peaks)))


def _budget_section(run: SuiteRun) -> List[str]:
    """The markdown on ``--memory_budget_mb``: the search and the largest batch per (model, configuration)."""
    if not run.batch_fits:
        return []
    return [
        "", f"## Largest batch within {run.settings.memory_budget_mb:g} MiB", "",
        "Each batch size's peak above baseline was measured as above, in a subprocess of its own (the measured "
        "placement decided afresh for each batch). The search doubles the batch from 1 until one does not fit, then "
        "bisects between the last that fit and the first that did not: the largest batch fits, the next batch "
        "measured (one more) does not.", "", *markdown_table(BUDGET_HEADER, [], BUDGET_ALIGN),
        *(budget_row(fit) for fit in run.batch_fits),
    ]


Fusions = Tuple[Tuple[str, int], ...]


def fusion_cells(fusions: Fusions, reference: Fusions) -> Tuple[str, str]:
    """The fused kernels a step ran (kernel xN), and those a ``reference`` step ran more of (N vs M), as two cells."""
    ran = dict(fusions)
    lost = [f"{name} ({ran.get(name, 0)} vs {count})" for name, count in reference if ran.get(name, 0) < count]
    return ", ".join(f"{name} x{count}" for name, count in fusions) or "none", ", ".join(lost) or "-"


def fusion_row(result: VariantResult, baseline: Optional[VariantResult]) -> str:
    """One row of the fusion table: the fusions a variant's step ran, and those float32's step ran more of."""
    reference = baseline.fusions if baseline else ()
    return markdown_row((result.model, result.label, *fusion_cells(result.fusions, reference)))


def _fusion_section(run: SuiteRun) -> List[str]:
    """The markdown on fusions: each measured step's fused kernels beside float32's (none when nothing fused)."""
    measured = [result for result in run.results if not result.unavailable]
    if not any(result.fusions for result in measured):
        return []
    baselines = {result.model: result for result in measured if result.label == BASELINE}
    return [
        "", "## Fused kernels", "",
        "The kernels each step executed (its partition graphs, after grappler's and oneDNN's rewrites) that fuse "
        "several graph ops, by grappler's name (`slim_mp.op_families.fusion_name`), and those the float32 step "
        "ran more of: a fusion a low-precision placement lost, or one TensorFlow has in float32 only.", "",
        *markdown_table(FUSION_HEADER, [], FUSION_ALIGN),
        *(fusion_row(result, baselines.get(result.model)) for result in measured),
    ]


def _markdown(run: SuiteRun) -> str:
    """A short description of the device and method, then one table row per (model, configuration)."""
    settings = run.settings
    size = settings.image_size or "each network's default"
    lines = ["# slim_mp benchmark", "", f"Device: {run.device.describe()}", ""]
    for name, support in run.support.items():
        lines.append(f"- {support.describe()}; {'benchmarked' if name in run.precisions else 'not benchmarked'}")
    lines += [
        "",
        f"Batch size {settings.batch_size}; image size: {size}. Each configuration ran {settings.warmup} untimed "
        f"warm-up step(s), then {settings.rounds} timed rounds, all configurations interleaved in one process. "
        "Speed-up: median over rounds of float32's step time divided by the configuration's in the same round.",
        "slim_mp uses the pass's default measured placement (allow ops and close candidates timed on this device, "
        "float32 kept where low precision does not pay), slim_mp_static the static op lists. Pass time, cold / "
        "warm: the pass's first build, in a fresh process with an empty timing-cache folder of the run's own (the "
        "memory run), then the same build again in the timed process, with the cache that build filled.",
        "",
        f"Peak memory: {'; '.join(_memory_methods(run))}, each configuration in its own subprocess "
        f"running {settings.memory_steps} step(s); the baseline is what was in use before building the step.",
    ]
    if run.skipped:
        lines += ["", *(f"Left out: {note}." for note in run.skipped)]
    lines += ["", *markdown_table(TABLE_HEADER, [_table_cells(result) for result in run.results], TABLE_ALIGN),
              *_fusion_section(run), *_load_section(run), *_budget_section(run), ""]
    return "\n".join(lines)


def draw_speedups(run: SuiteRun, path: str) -> None:
    """A grouped bar chart (Agg backend) of each low-precision configuration's speed-up over float32, per model."""
    models = list(dict.fromkeys(result.model for result in run.results))
    labels = list(dict.fromkeys(result.label for result in run.results if result.label != BASELINE))
    speedups: Dict[tuple, float] = {(r.model, r.label): r.speedup_vs_float32 or 0.0 for r in run.results}
    figure = Figure(figsize=(max(6.0, 1.5 + 0.4 * len(models) * (len(labels) + 1)), 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    width = 0.8 / max(1, len(labels))
    for index, label in enumerate(labels):
        positions = [model_index + (index - (len(labels) - 1) / 2) * width for model_index in range(len(models))]
        values = [speedups.get((model, label), 0.0) for model in models]
        bars = axes.bar(positions, values, width, label=label)
        axes.bar_label(bars, labels=[f"{value:.2f}" if value else "n/a" for value in values], fontsize=7)
    axes.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    axes.set_xticks(range(len(models)), models, rotation=20, ha="right")
    axes.set_ylabel("speed-up vs float32 (x)")
    axes.set_title(f"Train-step speed-up, batch {run.settings.batch_size}, {run.device.describe()}", fontsize=9)
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.savefig(path, dpi=120)


def write_report_files(output_dir: str, stem: str, content: dict, markdown: str,
                       draw: Callable[[str], None]) -> Dict[str, str]:
    """Write ``stem``.json (``content``), .md (``markdown``) and .png (``draw(path)``) into ``output_dir``
    (created if needed); their paths by kind (``json``, ``md``, ``png``)."""
    os.makedirs(output_dir, exist_ok=True)
    paths = {kind: os.path.join(output_dir, f"{stem}.{kind}") for kind in ("json", "md", "png")}
    write_json_atomically(paths["json"], content)
    with open(paths["md"], "w", encoding="utf-8") as handle:
        handle.write(markdown)
    draw(paths["png"])
    return paths


@dataclasses.dataclass(frozen=True)
class BenchmarkReport:
    """The report of one ``SuiteRun``: the report verbs every tool of ``slim_mp.measure`` shares."""

    run: SuiteRun

    def to_dict(self) -> dict:
        """The whole run as plain JSON values (``benchmark.json``)."""
        run = self.run
        return {
            "device": run.device.as_json(),
            "precision_support": {name: dataclasses.asdict(support) for name, support in run.support.items()},
            "precisions": list(run.precisions),
            "settings": dataclasses.asdict(run.settings),
            "memory_methods": _memory_methods(run),
            "skipped": list(run.skipped),
            "results": [dataclasses.asdict(result) for result in run.results],
            "background_load": run.background_load,
            "quiet_retimings": [dataclasses.asdict(retiming) for retiming in run.quiet_retimings],
            "batch_fits": [dataclasses.asdict(fit) for fit in run.batch_fits],
        }

    def to_markdown(self) -> str:
        """``benchmark.md``: the device and method, then one table row per (model, configuration)."""
        return _markdown(self.run)

    def write_reports(self, output_dir: str) -> Dict[str, str]:
        """Write benchmark.json, .md and .png into ``output_dir`` (created if needed); their paths by kind."""
        return write_report_files(output_dir, "benchmark", self.to_dict(), self.to_markdown(),
                                  lambda path: draw_speedups(self.run, path))
