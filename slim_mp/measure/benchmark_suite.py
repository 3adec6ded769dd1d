"""Benchmark several networks: float32, slim_mp, grappler's AMP and the low-precision floor, per precision.

Every (model, variant)'s peak memory is measured first, each in its own subprocess
(``slim_mp.measure.peak_memory``); then, model by model, all variants are built in this process and timed
interleaved (``slim_mp.measure.benchmark_step``), so that noise on a shared machine hits them alike. Speed-ups are the
median over rounds of float32's step time divided by the variant's in the same round.
"""

import dataclasses
import statistics
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from nets import nets_factory
from slim_mp.measure import benchmark_step
from slim_mp.measure import peak_memory
from slim_mp.devices import DeviceInfo, PrecisionSupport, native_precisions, precision_support
from slim_mp.precision import resolve_precision, short_name

BASELINE = "float32"
LOW_PRECISION_CONFIGS = ("slim_mp", "grappler", "floor")

Progress = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class Variant:
    """One timed configuration: a ``benchmark_step.CONFIGS`` entry at one precision."""

    config: str
    precision: str

    @property
    def label(self) -> str:
        """``float32``, or the config and short precision, e.g. ``slim_mp_bf16``."""
        if self.config == BASELINE:
            return BASELINE
        return f"{self.config}_{short_name(tf.as_dtype(self.precision))}"


@dataclasses.dataclass(frozen=True)
class Settings:
    """What to run: batch size, input size (None: each network's default), timed rounds, warm-up and memory steps."""

    batch_size: int
    image_size: Optional[int]
    rounds: int
    warmup: int
    memory_steps: int = 3

    def __post_init__(self) -> None:
        for name, minimum in (("batch_size", 1), ("rounds", 1), ("warmup", 0), ("memory_steps", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name}={value!r} is invalid; pass an integer of at least {minimum}.")
        if self.image_size is not None and (not isinstance(self.image_size, int) or self.image_size < 1):
            raise ValueError(f"image_size={self.image_size!r} is invalid; pass a positive integer or leave it unset.")


@dataclasses.dataclass(frozen=True)
class VariantResult:
    """The measurements of one variant on one model."""

    model: str
    label: str
    config: str
    precision: str
    native: bool
    median_seconds: float
    images_per_second: float
    speedup_vs_float32: float
    step_seconds: Tuple[float, ...]
    casts_executed: int
    casts_in_graph: int
    pass_seconds: Optional[float]
    peak_memory_bytes: int
    baseline_memory_bytes: int
    memory_method: str


def check_models(models: Sequence[str]) -> List[str]:
    """The model names, each checked against ``nets_factory``; ValueError naming the first unknown one."""
    if not models:
        raise ValueError("models is empty; pass at least one network name, e.g. --models resnet_v1_50.")
    for name in models:
        try:
            nets_factory.network_function(name)
        except ValueError as error:
            raise ValueError(f"models: {error}") from None
    return list(models)


def choose_precisions(requested: Sequence[str], device: DeviceInfo) -> List[str]:
    """The precisions to benchmark: those ``requested`` (canonical names), or by default the native ones.

    Emulated precisions run only when asked for; with none requested and none native this is a ValueError.
    """
    if not requested:
        native = native_precisions(device)
        if not native:
            raise ValueError(f"No low precision is native on {device.describe()}; pass --precisions bfloat16 "
                             f"or float16 to benchmark an emulated one.")
        return native
    chosen = []
    for name in requested:
        try:
            canonical = resolve_precision(name).name
        except ValueError:
            raise ValueError(f"precisions has {name!r}, which is not a low precision; "
                             f"use bfloat16 and/or float16.") from None
        if canonical not in chosen:
            chosen.append(canonical)
    return chosen


def plan_variants(precisions: Sequence[str], device: DeviceInfo) -> Tuple[List[Variant], List[str]]:
    """float32 then, per precision, slim_mp, grappler and floor; plus notes on variants left out and why.

    Grappler's bfloat16 mode rewrites only CPU-placed ops, so on a GPU grappler runs float16 only.
    """
    variants = [Variant(BASELINE, BASELINE)]
    skipped = []
    for precision in precisions:
        for config in LOW_PRECISION_CONFIGS:
            variant = Variant(config, precision)
            if device.kind == "GPU" and config == "grappler" and precision == "bfloat16":
                skipped.append(f"{variant.label}: grappler's bfloat16 mode (oneDNN) rewrites only CPU ops")
            else:
                variants.append(variant)
    return variants, skipped


def _measure_memory(model: str, variants: Sequence[Variant], settings: Settings,
                    progress: Progress) -> Dict[str, peak_memory.MemoryMeasurement]:
    memory = {}
    for variant in variants:
        progress(f"[{model}] {variant.label}: measuring peak memory in a subprocess")
        memory[variant.label] = peak_memory.measure_in_subprocess(peak_memory.MemoryRequest(
            variant.config, model, variant.precision, settings.batch_size, settings.image_size,
            settings.memory_steps))
        progress(f"[{model}] {variant.label}: peak memory {memory[variant.label].peak_bytes / 2 ** 20:.1f} MiB")
    return memory


def _build_steps(model: str, variants: Sequence[Variant], settings: Settings,
                 progress: Progress) -> Dict[str, benchmark_step.BenchmarkStep]:
    steps = {}
    for variant in variants:
        steps[variant.label] = benchmark_step.build_benchmark_step(
            variant.config, model, tf.as_dtype(variant.precision), settings.batch_size, settings.image_size)
        progress(f"[{model}] {variant.label}: built")
    return steps


def benchmark_model(model: str, variants: Sequence[Variant], settings: Settings,
                    support: Dict[str, PrecisionSupport], memory: Dict[str, peak_memory.MemoryMeasurement],
                    progress: Progress) -> List[VariantResult]:
    """Interleaved timing of all ``variants`` of ``model``, joined with their ``memory`` measurements by label."""
    steps = _build_steps(model, variants, settings, progress)
    try:
        casts = {label: benchmark_step.executed_casts(step) for label, step in steps.items()}
        times = benchmark_step.interleaved_times(
            {label: step.session.make_callable(step.train_op) for label, step in steps.items()},
            settings.rounds, settings.warmup, progress=lambda line: progress(f"[{model}] {line}"))
    finally:
        for step in steps.values():
            step.session.close()
    results = []
    for variant in variants:
        label = variant.label
        median = statistics.median(times[label])
        results.append(VariantResult(
            model=model, label=label, config=variant.config, precision=variant.precision,
            native=variant.config == BASELINE or support[variant.precision].native,
            median_seconds=median, images_per_second=settings.batch_size / median,
            speedup_vs_float32=benchmark_step.paired_ratio(times, BASELINE, label),
            step_seconds=tuple(times[label]), casts_executed=casts[label],
            casts_in_graph=steps[label].graph_casts, pass_seconds=steps[label].pass_seconds,
            peak_memory_bytes=memory[label].peak_bytes, baseline_memory_bytes=memory[label].baseline_bytes,
            memory_method=memory[label].method))
    return results


@dataclasses.dataclass(frozen=True)
class SuiteRun:
    """Everything a report needs: the device and its precision support, what ran, and the results."""

    device: DeviceInfo
    support: Dict[str, PrecisionSupport]
    settings: Settings
    precisions: Tuple[str, ...]
    skipped: Tuple[str, ...]
    results: Tuple[VariantResult, ...]


def run_suite(models: Sequence[str], precisions: Sequence[str], settings: Settings, device: DeviceInfo,
              progress: Progress) -> SuiteRun:
    """Measure every model's memory first, then time one model's variants at a time.

    Memory comes first because TensorFlow never hands GPU memory back: once this process has run
    a session on the GPU, a subprocess could no longer allocate what it needs there.
    """
    variants, skipped = plan_variants(precisions, device)
    support = precision_support(device)
    memory = {model: _measure_memory(model, variants, settings, progress) for model in models}
    results = []
    for model in models:
        results.extend(benchmark_model(model, variants, settings, support, memory[model], progress))
    return SuiteRun(device, support, settings, tuple(precisions), tuple(skipped), tuple(results))
