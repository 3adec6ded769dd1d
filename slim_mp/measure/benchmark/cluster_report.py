"""Write a cluster benchmark (``cluster_suite``) as ``benchmark.json``, ``benchmark.md`` and ``benchmark.png``.

The markdown: the step times of every configuration in one process and on the cluster; the
speed-up each low precision keeps on the cluster and its bytes across the wire against float32's;
the fused kernels of each cluster step against the one process's; the scaling tables of
``cluster_scaling`` (workers per parameter-server link, servers per worker count); on a shaped link,
the measured cluster step beside what the model predicts for one worker on that link. The chart:
speed-ups over float32 per layout, and the bytes across the wire per step.
"""

import dataclasses
from typing import Dict, List, Optional, Tuple

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from slim_mp.markdown_table import markdown_table
from slim_mp.measure.benchmark import cluster_scaling
from slim_mp.measure.benchmark.batch_budget import MIB
from slim_mp.measure.benchmark.benchmark_report import fusion_cells, write_report_files
from slim_mp.measure.benchmark.cluster_suite import CLUSTER, PROCESS, cluster_label
from slim_mp.measure.benchmark.suite_results import BASELINE, ClusterResult, ClusterRun, Variant

STEP_HEADER = ("model", "layout", "config", "precision", "ms/step (median)", "images/s", "speed-up vs fp32",
               "MiB sent / received per step", "MiB across the wire per step")
KEPT_HEADER = ("model", "precision", "speed-up, one process", "speed-up, cluster", "cluster / one process",
               "wire MiB, float32", "wire MiB, low", "low / float32")
FUSION_HEADER = ("model", "config", "fused kernels, one process", "fused kernels, cluster", "fewer on the cluster")
WORKERS_HEADER = ("model", "step", "one-process ms/step", "busier direction MiB/step",
                  *(f"workers per ps link, {gbits:g} Gbit/s" for gbits in cluster_scaling.LINK_GBITS))
SERVERS_HEADER = ("model", "step", "link", *(f"ps for {count} workers" for count in cluster_scaling.WORKER_COUNTS))
SHAPED_HEADER = ("model", "step", "wire ms/step (busier direction)", "predicted ms/step: overlapped / serial",
                 "measured ms/step", "within")


def _ms(seconds: Optional[float]) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def _mib(value: Optional[int]) -> str:
    return "-" if value is None else f"{value / MIB:.1f}"


def _count(value: Optional[int], unbounded: str = "none") -> str:
    return unbounded if value is None else str(value)


def _by_label(run: ClusterRun) -> Dict[Tuple[str, str], ClusterResult]:
    return {(result.model, result.label): result for result in run.results}


def _step_cells(result: ClusterResult) -> tuple:
    precision = result.variant.precision if result.native else f"{result.variant.precision} (emulated)"
    head = (result.model, result.layout, result.variant.label, precision)
    if result.unavailable:
        return (*head, f"n/a: {result.unavailable}", *("-" for _ in range(4)))
    split = "-" if result.sent_bytes is None else f"{_mib(result.sent_bytes)} / {_mib(result.received_bytes)}"
    return (*head, _ms(result.median_seconds), f"{result.images_per_second:.1f}",
            f"{result.speedup_vs_float32:.2f}x", split, _mib(result.wire_bytes))


def _measured_pairs(run: ClusterRun) -> List[Tuple[ClusterResult, ClusterResult]]:
    """Each measured cluster result with its measured one-process twin (same model and variant), in run order."""
    results = _by_label(run)
    pairs = []
    for result in run.results:
        alone = results.get((result.model, cluster_label(result.variant, PROCESS)))
        if result.layout == CLUSTER and not result.unavailable and alone and not alone.unavailable:
            pairs.append((result, alone))
    return pairs


def wire_loads(run: ClusterRun) -> List[Tuple[ClusterResult, cluster_scaling.WireLoad]]:
    """Per measured cluster step: the result and its wire load (the one-process step of the same variant as compute)."""
    return [(result, cluster_scaling.WireLoad(alone.median_seconds, result.sent_bytes, result.received_bytes))
            for result, alone in _measured_pairs(run)]


def _kept_rows(run: ClusterRun) -> List[tuple]:
    results = _by_label(run)
    rows = []
    for cluster, alone in _measured_pairs(run):
        base = results.get((cluster.model, cluster_label(Variant(BASELINE, BASELINE), CLUSTER)))
        if alone.variant.config == BASELINE or not base or base.unavailable:
            continue
        rows.append((cluster.model, alone.variant.precision, f"{alone.speedup_vs_float32:.2f}x",
                     f"{cluster.speedup_vs_float32:.2f}x",
                     f"{cluster.speedup_vs_float32 / alone.speedup_vs_float32:.2f}",
                     _mib(base.wire_bytes), _mib(cluster.wire_bytes),
                     f"{cluster.wire_bytes / base.wire_bytes:.2f}" if base.wire_bytes else "-"))
    return rows


def _fusion_rows(run: ClusterRun) -> List[tuple]:
    return [(result.model, result.variant.label, fusion_cells(alone.fusions, ())[0],
             *fusion_cells(result.fusions, alone.fusions)) for result, alone in _measured_pairs(run)]


def scaling_lines(run: ClusterRun) -> List[str]:
    """The two scaling tables (workers per parameter-server link; servers per worker count) and the model."""
    loads = wire_loads(run)
    workers = [(result.model, result.label, _ms(load.step_seconds), _mib(load.busier_direction_bytes),
                *(_count(cluster_scaling.workers_per_link(load, gbits), "any") for gbits in cluster_scaling.LINK_GBITS))
               for result, load in loads]
    servers = [(result.model, result.label, f"{gbits:g} Gbit/s",
                *(_count(cluster_scaling.parameter_servers_for(count, load, gbits))
                  for count in cluster_scaling.WORKER_COUNTS))
               for result, load in loads for gbits in cluster_scaling.LINK_GBITS]
    return ["", "## Past this machine, on paper", "", f"The model: {cluster_scaling.MODEL}.", "",
            "How many workers one parameter server's link carries before the wire, not the step, sets the pace:", "",
            *markdown_table(WORKERS_HEADER, workers, "llrr" + "r" * len(cluster_scaling.LINK_GBITS)), "",
            "How many parameter servers keep that many workers compute-bound:", "",
            *markdown_table(SERVERS_HEADER, servers, "lll" + "r" * len(cluster_scaling.WORKER_COUNTS)), "",
            "0 workers: even one worker's step waits for the wire. none: a worker's own link takes longer than its "
            "step, so no number of parameter servers keeps it compute-bound."]


def _shaped_lines(run: ClusterRun) -> List[str]:
    """On a shaped link: each cluster step beside the model's prediction for one worker on that link."""
    if run.link_gbits is None:
        return []
    rows = []
    for result, load in wire_loads(run):
        low, high = cluster_scaling.one_worker_step(load, run.link_gbits)
        inside = "yes" if low <= result.median_seconds <= high else (
            "faster" if result.median_seconds < low else "slower")
        rows.append((result.model, result.label, _ms(load.wire_seconds(run.link_gbits)), f"{_ms(low)} / {_ms(high)}",
                     _ms(result.median_seconds), inside))
    return ["", f"## The model against the {run.link_gbits:g} Gbit/s link", "",
            "One worker on the shaped link: its measured step against the model's bounds, every transfer overlapped "
            "(max of the one-process step and the busier direction's wire time) and none (the one-process step plus "
            "both directions one after the other).", "", *markdown_table(SHAPED_HEADER, rows, "llrrrl")]


def _markdown(run: ClusterRun) -> str:
    settings = run.settings
    where = f"a link shaped to {run.link_gbits:g} Gbit/s each way (a veth pair into a network namespace, tc tbf)" \
        if run.link_gbits is not None else "loopback"
    lines = ["# slim_mp cluster benchmark", "", f"Device: {run.device.describe()}", ""]
    lines += [f"- {support.describe()}" for name, support in run.support.items() if name in run.precisions]
    lines += [
        "", f"One parameter server (`parameter_server.py`, its own process) over {where}; this process is the worker. "
        f"Batch size {settings.batch_size}; image size: {settings.image_size or 'each network default'}. Each "
        f"configuration ran {settings.warmup} untimed warm-up step(s), then {settings.rounds} timed rounds, one "
        "process's and the cluster's configurations interleaved. Speed-up: median over rounds of float32's step "
        "time (same layout) divided by the configuration's in the same round. Bytes across the wire: one traced "
        "step after the rounds, every tensor the worker sent to or received from the parameter server.",
    ]
    if run.link_note:
        lines += ["", f"Note: {run.link_note}."]
    lines += ["", *markdown_table(STEP_HEADER, [_step_cells(result) for result in run.results], "llll" + "r" * 5),
              "", "## Speed-up kept, bytes on the wire", "",
              *markdown_table(KEPT_HEADER, _kept_rows(run), "ll" + "r" * 6),
              "", "## Fused kernels", "", *markdown_table(FUSION_HEADER, _fusion_rows(run), "lllll"),
              *scaling_lines(run), *_shaped_lines(run), ""]
    return "\n".join(lines)


def _scaling_json(run: ClusterRun) -> List[dict]:
    return [{"model": result.model, "label": result.label, "load": dataclasses.asdict(load),
             "workers_per_link": {f"{gbits:g}": cluster_scaling.workers_per_link(load, gbits)
                                  for gbits in cluster_scaling.LINK_GBITS},
             "parameter_servers": {f"{gbits:g}": {str(count): cluster_scaling.parameter_servers_for(count, load, gbits)
                                                  for count in cluster_scaling.WORKER_COUNTS}
                                   for gbits in cluster_scaling.LINK_GBITS}}
            for result, load in wire_loads(run)]


def draw(run: ClusterRun, path: str) -> None:
    """Two panels (Agg backend): each low precision's speed-up over float32 per layout, and wire MiB per step."""
    models = list(dict.fromkeys(result.model for result in run.results))
    measured = [result for result in run.results if not result.unavailable]
    figure = Figure(figsize=(max(8.0, 3.0 + 2.0 * len(models)), 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    speed, wire = figure.subplots(1, 2)
    for axes, picked, value, unit in (
            (speed, [r for r in measured if r.variant.config != BASELINE], lambda r: r.speedup_vs_float32, "{:.2f}"),
            (wire, [r for r in measured if r.layout == CLUSTER], lambda r: r.wire_bytes / MIB, "{:.0f}")):
        labels = list(dict.fromkeys(result.label for result in picked))
        values = {(result.model, result.label): value(result) for result in picked}
        width = 0.8 / max(1, len(labels))
        for index, label in enumerate(labels):
            positions = [i + (index - (len(labels) - 1) / 2) * width for i in range(len(models))]
            heights = [values.get((model, label), 0.0) for model in models]
            bars = axes.bar(positions, heights, width, label=label)
            axes.bar_label(bars, labels=[unit.format(h) if h else "n/a" for h in heights], fontsize=7)
        axes.set_xticks(range(len(models)), models, rotation=20, ha="right")
        axes.legend(fontsize=8)
    speed.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    speed.set_ylabel("speed-up vs float32 of the same layout (x)")
    wire.set_ylabel("MiB across the wire per step per worker")
    figure.suptitle(f"Parameter server over {run.link if run.link_gbits is None else f'{run.link_gbits:g} Gbit/s'}, "
                    f"batch {run.settings.batch_size}, {run.device.describe()}", fontsize=9)
    figure.savefig(path, dpi=120)


@dataclasses.dataclass(frozen=True)
class ClusterReport:
    """The report of one ``ClusterRun``: the report verbs every tool of ``slim_mp.measure`` shares."""

    run: ClusterRun

    def to_dict(self) -> dict:
        """The whole run as plain JSON values (``benchmark.json``), the scaling tables' numbers included."""
        run = self.run
        return {
            "device": run.device.as_json(),
            "precision_support": {name: dataclasses.asdict(support) for name, support in run.support.items()},
            "precisions": list(run.precisions), "settings": dataclasses.asdict(run.settings),
            "link": run.link, "link_gbits": run.link_gbits, "link_note": run.link_note,
            "results": [dict(dataclasses.asdict(result), wire_bytes=result.wire_bytes) for result in run.results],
            "scaling_model": cluster_scaling.MODEL, "scaling": _scaling_json(run),
        }

    def to_markdown(self) -> str:
        """``benchmark.md``: the method, the step table, speed-up kept and bytes, fusions, the scaling tables."""
        return _markdown(self.run)

    def write_reports(self, output_dir: str) -> Dict[str, str]:
        """Write benchmark.json, .md and .png into ``output_dir`` (created if needed); their paths by kind."""
        return write_report_files(output_dir, "benchmark", self.to_dict(), self.to_markdown(),
                                  lambda path: draw(self.run, path))
