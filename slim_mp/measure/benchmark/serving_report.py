"""Write a serving benchmark's results as ``serving.json``, ``serving.md`` and ``serving.png``.

The JSON keeps every measurement (each request's milliseconds in round order, so every ratio can be
recomputed); the markdown has the files' sizes side by side, then one row per (batch size, variant):
latency p50 / p99, images/s, the speed-up over float32 with its noise and verdict, and the
conv/matmul ops run in low precision ("n/a" with the reason for a variant that could not run); the
plot draws images/s and p50 latency by batch size, one line per variant.
"""

import dataclasses
from typing import Dict, List

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FormatStrFormatter, NullFormatter

from slim_mp.markdown_table import markdown_table
from slim_mp.measure.benchmark.benchmark_report import write_report_files
from slim_mp.measure.benchmark.served_models import FROZEN_GRAPH, ServedModel
from slim_mp.measure.benchmark.serving import FRESH_WEIGHTS, REFERENCE, ServingResult, ServingRun
from slim_mp.measure.benchmark.suite_results import BASELINE
from slim_mp.timing import MIN_NOISE_ROUNDS

SIZE_HEADER = ("precision", "format", "bytes", "vs float32", "path")
SIZE_ALIGN = "llrrl"
RESULT_HEADER = ("batch", "config", "format", "precision", "p50 ms", "p99 ms", "images/s", "speed-up vs float32",
                 "noise", "verdict", "conv/matmul run low")
RESULT_ALIGN = "rlll" + "rrrrrlr"


def _size_rows(models: List[ServedModel]) -> List[tuple]:
    float32 = {model.format: model.size_bytes for model in models if model.precision == BASELINE}
    return [(model.precision, model.format, str(model.size_bytes),
             f"{model.size_bytes / float32[model.format]:.2f}x" if model.format in float32 else "-", model.path)
            for model in models]


def _precision_cell(run: ServingRun, precision: str) -> str:
    support = run.support.get(precision)
    return precision if support is None or support.native else f"{precision} (emulated)"


def _result_cells(run: ServingRun, result: ServingResult) -> tuple:
    head = (str(result.batch_size), result.label, result.format, _precision_cell(run, result.precision))
    if result.unavailable:
        return (*head, f"n/a: {result.unavailable}", *("-" for _ in range(6)))
    noise = "-" if result.verdict == REFERENCE else f"±{result.noise * 100:.1f}%"
    if len(result.step_ms) < MIN_NOISE_ROUNDS:
        noise = "unknown"
    return (*head, f"{result.p50_ms:.2f}", f"{result.p99_ms:.2f}", f"{result.images_per_second:.1f}",
            f"{result.speedup_vs_float32:.2f}x", noise, result.verdict,
            f"{result.low_ops_run}/{result.compute_ops_run}")


def _input_shape(run: ServingRun) -> str:
    shapes = sorted({"x".join(map(str, model.input_shape[1:])) for model in run.models})
    return ", ".join(shapes)


def _markdown(run: ServingRun) -> str:
    options = run.options
    name = options.model_name or "served model"
    lines = [f"# slim_mp serving benchmark: {name}", "", f"Device: {run.device.describe()}", ""]
    lines += [f"- {support.describe()}" for support in run.support.values()]
    lines += [
        "", f"Weights: {run.weights}.", "",
        f"Each variant was opened once, in a session of its own, as a server opens a model; each request fed a batch "
        f"of random images of the model's input size ({_input_shape(run)}, values in [-1, 1]) from host memory and "
        f"fetched the class probabilities. Per batch size, every variant ran {options.warmup} untimed request(s), "
        f"then {options.rounds} timed ones, all variants interleaved in one process (rotating order). p50 / p99: "
        "percentiles of those requests' latency (with fewer than 100 requests the p99 lies among the slowest few); "
        "images/s: batch size / p50. Speed-up: median over rounds of the float32 model's latency (same format) over "
        "the variant's in the same round; noise: the spread of those ratios (their median absolute deviation over "
        "their median; unknown below 3 rounds); verdict: the noise rule's (a difference counts beyond the larger of "
        "1% and the noise).",
        "slim_mp_<precision>: the model exported with `export_inference_graph.py --precision=<precision>` (slim_mp's "
        "pass; weights stored in that precision). grappler_<precision>: the float32 model with grappler's auto mixed "
        "precision in the session config (TensorFlow's own AMP), n/a where it changes nothing on this device. "
        "conv/matmul run low: the convolution and matrix-product kernels the variant executed in float16 or "
        "bfloat16, of all it executed.",
        "", "## Files", "", *markdown_table(SIZE_HEADER, _size_rows(list(run.models)), SIZE_ALIGN),
        "", "## Latency and throughput", "",
        *markdown_table(RESULT_HEADER, [_result_cells(run, result) for result in run.results], RESULT_ALIGN), "",
    ]
    return "\n".join(lines)


def draw_serving(run: ServingRun, path: str) -> None:
    """Images/s and p50 latency by batch size, one line per variant (Agg backend)."""
    figure = Figure(figsize=(10.0, 4.2), layout="constrained")
    FigureCanvasAgg(figure)
    throughput, latency = figure.subplots(1, 2)
    lines: Dict[str, List[ServingResult]] = {}
    for result in run.results:
        if not result.unavailable:
            lines.setdefault(result.key, []).append(result)
    colours = {label: f"C{index}" for index, label in enumerate(dict.fromkeys(r.label for r in run.results))}
    for results in lines.values():
        style = dict(marker="o", color=colours[results[0].label], label=results[0].key,
                     linestyle="-" if results[0].format == FROZEN_GRAPH else "--")
        batches = [result.batch_size for result in results]
        throughput.plot(batches, [result.images_per_second for result in results], **style)
        latency.plot(batches, [result.p50_ms for result in results], **style)
    for axes, label in ((throughput, "images/s"), (latency, "p50 latency (ms)")):
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xticks(list(run.options.batch_sizes), [str(size) for size in run.options.batch_sizes])
        axes.xaxis.set_minor_formatter(NullFormatter())
        axes.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        axes.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
        axes.set_xlabel("batch size")
        axes.set_ylabel(label)
    throughput.legend(fontsize=8)
    figure.suptitle(f"Serving {run.options.model_name or 'served model'}: {run.device.describe()}", fontsize=9)
    figure.savefig(path, dpi=120)


@dataclasses.dataclass(frozen=True)
class ServingReport:
    """The report of one ``ServingRun``: the report verbs every tool of ``slim_mp.measure`` shares."""

    run: ServingRun

    def to_dict(self) -> dict:
        """The whole run as plain JSON values (``serving.json``)."""
        run = self.run
        return {
            "device": run.device.as_json(),
            "precision_support": {name: dataclasses.asdict(support) for name, support in run.support.items()},
            "options": dataclasses.asdict(run.options),
            "weights": run.weights,
            "fresh_weights": run.weights == FRESH_WEIGHTS,
            "models": [dataclasses.asdict(model) for model in run.models],
            "results": [dataclasses.asdict(result) for result in run.results],
        }

    def to_markdown(self) -> str:
        """``serving.md``: the device and method, the files' sizes, then one row per (batch size, variant)."""
        return _markdown(self.run)

    def write_reports(self, output_dir: str) -> Dict[str, str]:
        """Write serving.json, .md and .png into ``output_dir`` (created if needed); their paths by kind."""
        return write_report_files(output_dir, "serving", self.to_dict(), self.to_markdown(),
                                  lambda path: draw_serving(self.run, path))
