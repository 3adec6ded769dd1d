"""Write a float32-versus-mixed-precision step profile as text, JSON and a plot.

- ``profile.md``: the step times; the traced steps' parallelism, critical path, idle core time and
  the op types on the critical path or running alone, float32 beside mixed precision; per op
  type (the op a user built, whichever kernel ran it) the time, share and speed-up; the casts;
  the slowest convolutions and matrix products with their executed kernel and GFLOP/s against
  the device's peak; at the memory peak the live bytes by dtype and the largest live tensors
  with the ops holding them.
- ``profile.json``: the same numbers, every op included.
- ``profile.png``: per op type the milliseconds mixed precision saves (green) or costs (red), and
  the live bytes at the peak by dtype for both configurations.

``compare_profiles`` lines a float32 profile up with a mixed-precision one per op type.
"""

import dataclasses
import json
import os
from typing import Dict, List, Optional

from slim_mp.json_files import write_json_atomically
from slim_mp.markdown_table import markdown_table
from slim_mp.measure.profiling.device_peak import DevicePeak
from slim_mp.measure.profiling.step_profile import MATMUL_TYPES, StepProfile

TOP_TYPES = 15
TOP_OPS = 12
TOP_TENSORS = 10
MIB = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class TypeComparison:
    """One op type in a float32 profile and a mixed-precision one."""

    op_type: str
    float32_ms: float
    mixed_ms: float

    @property
    def saved_ms(self) -> float:
        """Time mixed precision saves on this type (negative: it costs time)."""
        return self.float32_ms - self.mixed_ms

    @property
    def speedup(self) -> Optional[float]:
        return self.float32_ms / self.mixed_ms if self.mixed_ms > 0 and self.float32_ms > 0 else None


def compare_profiles(float32: StepProfile, mixed: StepProfile) -> List[TypeComparison]:
    """Per op type, the time of both profiles, largest mixed-precision share first (types of either side)."""
    ours, theirs = mixed.by_type(), float32.by_type()
    types = sorted(set(ours) | set(theirs), key=lambda name: -max(ours.get(name, 0.0), theirs.get(name, 0.0)))
    return [TypeComparison(name, theirs.get(name, 0.0), ours.get(name, 0.0)) for name in types]


def _peak_for(op_type: str, peak: Optional[DevicePeak]) -> Optional[float]:
    if peak is None:
        return None
    return peak.matmul_gflops if op_type in MATMUL_TYPES else peak.conv_gflops


def _type_rows(comparisons: List[TypeComparison], mixed: StepProfile) -> List[str]:
    total = mixed.op_ms or 1.0
    rows = [(row.op_type, f"{row.float32_ms:.1f}", f"{row.mixed_ms:.1f}", f"{100 * row.mixed_ms / total:.1f}%",
             f"{row.speedup:.2f}x" if row.speedup else "-") for row in comparisons[:TOP_TYPES]]
    return markdown_table(("op type", "float32 ms", "mixed ms", "share of mixed", "speed-up"), rows, "lrrrr")


def _heavy_op_rows(profile: StepProfile, peak: Optional[DevicePeak]) -> List[str]:
    rows = []
    for op in [op for op in profile.ops if op.flops][:TOP_OPS]:
        achieved = op.gflops_per_second
        peak_value = _peak_for(op.op_type, peak)
        share = f"{100 * achieved / peak_value:.0f}%" if achieved and peak_value else "-"
        rows.append((op.name, op.op_type, op.kernel, op.dtype, f"{op.micros / 1e3:.2f}", f"{achieved or 0:.1f}", share))
    return markdown_table(("op", "type", "kernel", "dtype", "ms", "GFLOP/s", "of peak"), rows, "llllrrr")


def _parallelism_rows(float32: StepProfile, mixed: StepProfile) -> List[str]:
    """Both profiles' parallelism side by side, then the op types on the critical path and running alone."""
    sides = [profile.parallelism for profile in (float32, mixed)]
    if None in sides:
        return []
    figures = (("traced step span (ms)", "span_ms", ".1f"), ("sum of op times (ms)", "op_ms", ".1f"),
               ("parallelism (op time / span)", "parallelism", ".2f"),
               ("critical path (ms)", "critical_path_ms", ".1f"),
               ("ops on the critical path", "critical_path_ops", ".0f"),
               ("critical path over data edges alone (ms)", "data_critical_path_ms", ".1f"),
               ("parallelism the graph allows (op time / critical path)", "available_parallelism", ".2f"),
               (f"idle core time (ms, of {sides[0].cores} cores)", "idle_core_ms", ".1f"),
               ("no op running (ms)", "no_op_ms", ".1f"), ("one op running alone (ms)", "alone_ms", ".1f"),
               ("casts on the critical path", "critical_casts", ".0f"),
               ("cast time on the critical path (ms)", "critical_cast_ms", ".1f"))
    rows = [(title, *(format(getattr(side, name), spec) for side in sides)) for title, name, spec in figures]
    lines = ["Medians over the traced steps (tracing slows a step: ratios within a step are what to compare).", ""]
    lines += markdown_table(("figure", float32.label, mixed.label), rows, "lrr")
    for title, field in (("on the critical path", "critical_by_type"), ("running alone", "alone_by_type")):
        types = sorted(set(getattr(sides[0], field)) | set(getattr(sides[1], field)),
                       key=lambda name: -max(getattr(side, field).get(name, 0.0) for side in sides))
        type_rows = [(name, *(f"{getattr(side, field).get(name, 0.0):.1f}" for side in sides)) for name in types]
        lines += ["", f"Milliseconds per op type {title}:", ""]
        lines += markdown_table(("op type", float32.label, mixed.label), type_rows, "lrr")
    return lines


def _memory_rows(profile: StepProfile) -> List[str]:
    summary = (f"{profile.label}: {profile.peak_live_bytes / MIB:.1f} MiB of step tensors alive at the peak; by dtype: "
               + ", ".join(f"{dtype} {size / MIB:.1f} MiB" for dtype, size in profile.live_bytes_by_dtype().items()))
    rows = [(tensor.producer, tensor.op_type, tensor.dtype, "x".join(str(dim) for dim in tensor.shape) or "scalar",
             f"{tensor.bytes / MIB:.2f}") for tensor in profile.live_at_peak[:TOP_TENSORS]]
    return [summary, "", *markdown_table(("tensor made by", "op type", "dtype", "shape", "MiB"), rows, "llllr")]


def _markdown(title: str, float32: StepProfile, mixed: StepProfile, peaks: Dict[str, DevicePeak]) -> str:
    """The Markdown report of one model's two profiles."""
    comparisons = compare_profiles(float32, mixed)
    lines = [f"# Step profile: {title}", ""]
    lines.append(f"- step (untraced median): float32 {float32.step_ms:.1f} ms, {mixed.label} {mixed.step_ms:.1f} ms "
                 f"({float32.step_ms / mixed.step_ms:.2f}x)")
    lines.append(f"- sum of op times: float32 {float32.op_ms:.1f} ms, {mixed.label} {mixed.op_ms:.1f} ms")
    for profile in (float32, mixed):
        count, cast_ms = profile.casts()
        lines.append(f"- casts in {profile.label}: {count} ops, {cast_ms:.1f} ms "
                     f"({100 * cast_ms / (profile.op_ms or 1):.1f}% of op time)")
    for precision, peak in peaks.items():
        emulated = " (emulated on this device, measured on small shapes)" if peak.emulated else ""
        lines.append(f"- device peak, {precision}: conv {peak.conv_gflops:.1f} GFLOP/s, "
                     f"matmul {peak.matmul_gflops:.1f} GFLOP/s{emulated}")
    parallelism = _parallelism_rows(float32, mixed)
    if parallelism:
        lines += ["", "## Parallelism and the critical path", ""] + parallelism
    lines += ["", "## Time per op type", ""] + _type_rows(comparisons, mixed)
    lost = [row for row in comparisons if row.saved_ms < 0]
    if lost:
        lines += ["", "Slower in mixed precision: " + ", ".join(
            f"{row.op_type} (+{-row.saved_ms:.1f} ms)" for row in sorted(lost, key=lambda r: r.saved_ms)[:8])]
    for profile in (float32, mixed):
        lines += ["", f"## Heaviest convolutions and matrix products, {profile.label}", ""]
        lines += _heavy_op_rows(profile, peaks.get(profile.label))
    lines += ["", "## Memory at the peak of live step tensors", ""]
    lines += _memory_rows(float32) + [""] + _memory_rows(mixed)
    return "\n".join(lines) + "\n"


def _json(title: str, float32: StepProfile, mixed: StepProfile, peaks: Dict[str, DevicePeak]) -> dict:
    """Every number of the report, every op included."""
    def profile_dict(profile: StepProfile) -> dict:
        count, cast_ms = profile.casts()
        return {"label": profile.label, "step_ms": profile.step_ms, "op_ms": profile.op_ms,
                "casts": count, "cast_ms": cast_ms, "by_type_ms": profile.by_type(),
                "parallelism": profile.parallelism.to_dict() if profile.parallelism else None,
                "peak_live_bytes": profile.peak_live_bytes, "live_bytes_by_dtype": profile.live_bytes_by_dtype(),
                "live_at_peak": [dataclasses.asdict(t) for t in profile.live_at_peak],
                "ops": [dict(dataclasses.asdict(op), gflops_per_second=op.gflops_per_second) for op in profile.ops]}
    return {"title": title, "float32": profile_dict(float32), "mixed": profile_dict(mixed),
            "device_peaks": {name: dataclasses.asdict(peak) for name, peak in peaks.items()},
            "by_type": [dict(dataclasses.asdict(row), saved_ms=row.saved_ms, speedup=row.speedup)
                        for row in compare_profiles(float32, mixed)]}


def plot_profile(title: str, float32: StepProfile, mixed: StepProfile, path: str) -> None:
    """Saved/lost milliseconds per op type, and live bytes at the peak by dtype."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot

    rows = sorted(compare_profiles(float32, mixed)[:TOP_TYPES], key=lambda row: row.saved_ms)
    figure, (time_axis, memory_axis) = pyplot.subplots(1, 2, figsize=(13, 5.5), gridspec_kw={"width_ratios": [3, 2]})
    colours = ["tab:green" if row.saved_ms >= 0 else "tab:red" for row in rows]
    time_axis.barh([row.op_type for row in rows], [row.saved_ms for row in rows], color=colours)
    time_axis.axvline(0, color="black", linewidth=0.8)
    time_axis.set_xlabel(f"ms saved per step by {mixed.label} (red: lost)")
    time_axis.set_title(f"step {float32.step_ms:.0f} ms -> {mixed.step_ms:.0f} ms")
    dtypes = sorted(set(float32.live_bytes_by_dtype()) | set(mixed.live_bytes_by_dtype()))
    bottoms = [0.0, 0.0]
    for dtype in dtypes:
        sizes = [profile.live_bytes_by_dtype().get(dtype, 0) / MIB for profile in (float32, mixed)]
        memory_axis.bar(["float32", mixed.label], sizes, bottom=bottoms, label=dtype)
        bottoms = [b + s for b, s in zip(bottoms, sizes)]
    memory_axis.set_ylabel("MiB of step tensors alive at the peak")
    memory_axis.legend(title="dtype")
    memory_axis.set_title("memory at the peak")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


@dataclasses.dataclass(frozen=True)
class ProfileReport:
    """One model's float32 and mixed-precision profiles (and the device peaks), with the report verbs."""

    title: str
    float32: StepProfile
    mixed: StepProfile
    peaks: Dict[str, DevicePeak]

    def to_dict(self) -> dict:
        """``profile.json``: every number of the report, every op included."""
        return _json(self.title, self.float32, self.mixed, self.peaks)

    def to_markdown(self) -> str:
        """``profile.md``: the step times, the per-type table, the heaviest ops and the memory peak."""
        return _markdown(self.title, self.float32, self.mixed, self.peaks)

    def write_reports(self, output_dir: str) -> Dict[str, str]:
        """Write profile.md, profile.json, profile.png and each step's Chrome trace (``trace_<label>.json``, the
        last traced step in TensorFlow's timeline format: open it in Perfetto or ``chrome://tracing`` to see the
        cores' op lanes) into ``output_dir``; return their paths by kind."""
        os.makedirs(output_dir, exist_ok=True)
        paths = {kind: os.path.join(output_dir, f"profile.{kind}") for kind in ("md", "json", "png")}
        for profile in (self.float32, self.mixed):
            paths[f"trace_{profile.label}"] = os.path.join(output_dir, f"trace_{profile.label}.json")
            write_json_atomically(paths[f"trace_{profile.label}"], json.loads(profile.chrome_trace))
        temporary = paths["md"] + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(self.to_markdown())
        os.replace(temporary, paths["md"])
        write_json_atomically(paths["json"], self.to_dict())
        plot_profile(self.title, self.float32, self.mixed, paths["png"])
        return paths
