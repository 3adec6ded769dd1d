"""Benchmark several networks: float32, slim_mp (measured and static placement), grappler's AMP and the floor.

Every (model, variant)'s peak memory is measured first, each in its own subprocess
(``peak_memory``; the measured placement's timings are cached by a first run, so its
peak is the step's; that first run, in a fresh process with an empty cache folder of its own,
gives the cold pass time, the build timed later in this process the warm one); with a memory
budget, the largest batch within it (``batch_budget``, float32 and slim_mp); then, model by
model, all variants are built in this process and timed interleaved (``benchmark_step``), so
that noise on a shared machine hits them alike. Speed-ups are the median over rounds of
float32's step time divided by the variant's in the same round. A variant
that cannot be built or run (say, the floor of a network with an op that has no low-precision
kernel) is reported as unavailable with the reason, and the others go on.

With a background load (``under_load``), all of that runs beside the load, each measured
placement pinned in a decisions file; then the load is stopped and float32 and each pinned
placement are re-timed side by side on the quiet machine.
"""

import dataclasses
import statistics
import tempfile
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

import tensorflow as tf

from nets import nets_factory
from slim_mp.devices import DeviceInfo, PrecisionSupport, native_precisions, precision_support
from slim_mp.graph_pass import Placement, PlacementFiles, PlacementOptions
from slim_mp.measure.benchmark import benchmark_step, peak_memory, under_load
from slim_mp.measure.benchmark.batch_budget import DEFAULT_MAX_BATCH, MIB, largest_batch_within
from slim_mp.measure.benchmark.suite_results import BASELINE, BatchFit, Settings, SuiteRun, Variant, VariantResult
from slim_mp.precision import resolve_precision
from slim_mp.timing import paired_ratio

LOW_PRECISION_CONFIGS = ("slim_mp", "slim_mp_static", "grappler", "floor")
_MAX_REASON = 200

Progress = Callable[[str], None]
# What a step's first run is read for (its kernels, its fused kernels).
T = TypeVar("T")


def failure_reason(error: BaseException) -> str:
    """One short line saying why a variant failed.

    TensorFlow's messages (and a subprocess's traceback) bury the cause: prefer the line naming a
    missing kernel, then the last line naming an error that is not just a header, else the first line.
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
    kernel = [line for line in lines if "OpKernel" in line]
    named = [line for line in lines if "rror" in line and not line.endswith(":")
             and not line.startswith(("File ", "Traceback"))]
    reason = kernel[0] if kernel else named[-1] if named else lines[0]
    return reason if len(reason) <= _MAX_REASON else reason[:_MAX_REASON - 3] + "..."


def unavailable_result(model: str, variant: Variant, native: bool, reason: str) -> VariantResult:
    """The row of a variant that could not be measured."""
    return VariantResult(model=model, label=variant.label, config=variant.config, precision=variant.precision,
                         native=native, median_seconds=None, images_per_second=None, speedup_vs_float32=None,
                         step_seconds=(), casts_executed=None, casts_in_graph=None, pass_seconds=None,
                         peak_memory_bytes=None, baseline_memory_bytes=None, memory_method=None,
                         unavailable=reason)


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


def _step_peak(request: peak_memory.MemoryRequest) -> peak_memory.MemoryMeasurement:
    """The peak of ``request``'s train step, each run in a fresh subprocess; its ``pass_seconds`` is the first run's.

    For a measured placement a first run fills the timing cache (``request.cache_dir``): the peak is
    then the training step's, not that of the one-off micro-benchmarks and candidate copies, and
    the first run's pass time is the cold pass. Fixed timings (``$SLIM_MP_TIMINGS_FILE``) time
    nothing, so there is nothing to fill.
    """
    timings_fixed = bool(PlacementFiles().fixed_timings_file())
    if benchmark_step.PLACEMENT_OF.get(request.config) is not Placement.MEASURED or timings_fixed:
        return peak_memory.measure_in_subprocess(request)
    cold = peak_memory.measure_in_subprocess(request)
    return dataclasses.replace(peak_memory.measure_in_subprocess(request), pass_seconds=cold.pass_seconds)


def _measure_memory(model: str, variants: Sequence[Variant], settings: Settings, progress: Progress,
                    failures: Dict[str, str], cache_dir: Optional[str] = None,
                    ) -> Dict[str, peak_memory.MemoryMeasurement]:
    """Peak memory per variant label (``_step_peak``); a variant whose subprocess fails goes into ``failures``."""
    memory = {}
    for variant in variants:
        progress(f"[{model}] {variant.label}: measuring peak memory in a subprocess")
        request = peak_memory.MemoryRequest(variant.config, model, variant.precision, settings.batch_size,
                                            settings.image_size, settings.memory_steps, cache_dir)
        try:
            memory[variant.label] = _step_peak(request)
        except (ValueError, RuntimeError) as error:
            failures[variant.label] = failure_reason(error)
            progress(f"[{model}] {variant.label}: n/a ({failures[variant.label]})")
            continue
        progress(f"[{model}] {variant.label}: peak memory {memory[variant.label].peak_bytes / 2 ** 20:.1f} MiB")
    return memory


def _search_batches(model: str, precisions: Sequence[str], settings: Settings, cache_dir: Optional[str],
                    progress: Progress) -> List[BatchFit]:
    """With ``settings.memory_budget_mb``: the largest batch of float32 and of slim_mp per precision within it."""
    if settings.memory_budget_mb is None:
        return []
    fits = []
    for variant in [Variant(BASELINE, BASELINE)] + [Variant("slim_mp", precision) for precision in precisions]:
        def bytes_above_baseline(batch: int, variant: Variant = variant) -> int:
            request = peak_memory.MemoryRequest(variant.config, model, variant.precision, batch,
                                                settings.image_size, settings.memory_steps, cache_dir)
            measured = _step_peak(request)
            above = measured.peak_bytes - measured.baseline_bytes
            progress(f"[{model}] {variant.label}: batch {batch}: {above / MIB:.1f} MiB above baseline")
            return above
        try:
            fits.append(largest_batch_within(model, variant.label, settings.memory_budget_mb, bytes_above_baseline))
        except (ValueError, RuntimeError) as error:
            fits.append(BatchFit(model, variant.label, int(settings.memory_budget_mb * MIB), None, (),
                                 DEFAULT_MAX_BATCH, unavailable=failure_reason(error)))
    return fits


def built_and_run_once(model: str, label: str, build: Callable[[], benchmark_step.BenchmarkStep],
                       first_run: Callable[[benchmark_step.BenchmarkStep], T], failures: Dict[str, str],
                       progress: Progress) -> Optional[Tuple[benchmark_step.BenchmarkStep, T]]:
    """``build()``'s step and what ``first_run`` read of it (its first step: the kernels it ran), with a progress
    line; None when either fails, the reason in ``failures[label]`` and a progress line, the step closed."""
    step = None
    try:
        step = build()
        first = first_run(step)
    except (ValueError, TypeError, tf.errors.OpError) as error:
        if step is not None:
            step.session.close()
        failures[label] = failure_reason(error)
        progress(f"[{model}] {label}: n/a ({failures[label]})")
        return None
    progress(f"[{model}] {label}: built")
    return step, first


def _build_steps(model: str, variants: Sequence[Variant], settings: Settings, progress: Progress,
                 failures: Dict[str, str], decisions_dir: Optional[str] = None, cache_dir: Optional[str] = None,
                 ) -> Tuple[Dict[str, benchmark_step.BenchmarkStep], Dict[str, Dict[str, int]]]:
    """Build and run once each variant not yet failed: (steps, kernels executed by kind); failures go into
    ``failures``.

    With ``decisions_dir``, each measured placement is pinned there (``under_load.decisions_path``);
    ``cache_dir``: the placement's timing cache.
    """
    steps, kernels = {}, {}
    for variant in variants:
        if variant.label in failures:
            continue
        pinned = (under_load.decisions_path(decisions_dir, model, variant.label)
                  if decisions_dir and benchmark_step.PLACEMENT_OF.get(variant.config) is Placement.MEASURED else None)
        options = PlacementOptions(PlacementFiles(cache_dir=cache_dir, decisions_file=pinned))
        built = built_and_run_once(
            model, variant.label,
            lambda: benchmark_step.build_benchmark_step(variant.config, model, tf.as_dtype(variant.precision),
                                                        settings.batch_size, settings.image_size,
                                                        placement_options=options),
            benchmark_step.executed_kernels, failures, progress)
        if built is not None:
            steps[variant.label], kernels[variant.label] = built
    return steps, kernels


def benchmark_model(model: str, variants: Sequence[Variant], settings: Settings,
                    support: Dict[str, PrecisionSupport], memory: Dict[str, peak_memory.MemoryMeasurement],
                    progress: Progress, failures: Optional[Dict[str, str]] = None,
                    decisions_dir: Optional[str] = None, cache_dir: Optional[str] = None) -> List[VariantResult]:
    """Interleaved timing of all ``variants`` of ``model``, joined with their ``memory`` measurements by label.

    ``failures`` (label -> reason) are variants already known not to work; more are added when a
    build or first run fails. Without a float32 baseline every variant of the model is unavailable.
    ``decisions_dir``: pin each measured placement there; ``cache_dir``: the placement's timing
    cache, which the memory runs filled (see ``_build_steps``).
    """
    failures = dict(failures or {})
    steps, kernels = _build_steps(model, variants, settings, progress, failures, decisions_dir, cache_dir)
    if BASELINE in failures:
        for step in steps.values():
            step.session.close()
        steps = {}
    try:
        times = benchmark_step.interleaved_times(
            {label: step.session.make_callable(step.train_op) for label, step in steps.items()},
            settings.rounds, settings.warmup, progress=lambda line: progress(f"[{model}] {line}"))
    finally:
        for step in steps.values():
            step.session.close()
    results = []
    for variant in variants:
        label = variant.label
        native = variant.config == BASELINE or support[variant.precision].native
        if label not in steps:
            reason = failures.get(label) or f"float32 baseline failed: {failures[BASELINE]}"
            results.append(unavailable_result(model, variant, native, reason))
            continue
        median = statistics.median(times[label])
        plan = steps[label].placement
        results.append(VariantResult(
            model=model, label=label, config=variant.config, precision=variant.precision,
            native=native, median_seconds=median, images_per_second=settings.batch_size / median,
            speedup_vs_float32=paired_ratio(times[BASELINE], times[label]),
            step_seconds=tuple(times[label]), casts_executed=kernels[label].get("Cast", 0),
            casts_in_graph=steps[label].graph_casts, pass_seconds=steps[label].pass_seconds,
            peak_memory_bytes=memory[label].peak_bytes, baseline_memory_bytes=memory[label].baseline_bytes,
            memory_method=memory[label].method, cold_pass_seconds=memory[label].pass_seconds,
            placement_float32_ops=len(plan.float32_ops) if plan else None,
            fusions=benchmark_step.fusions_run(kernels[label])))
    return results


def run_suite(models: Sequence[str], precisions: Sequence[str], settings: Settings, device: DeviceInfo,
              progress: Progress, background_load: int = 0, decisions_dir: Optional[str] = None) -> SuiteRun:
    """Measure every model's memory first, then time one model's variants at a time.

    Memory comes first because TensorFlow never hands GPU memory back: once this process has run
    a session on the GPU, a subprocess could no longer allocate what it needs there. With
    ``background_load`` busy processes all of this runs beside them, each measured placement pinned
    in ``decisions_dir`` (required then); then the load stops and the placements are re-timed quietly.
    """
    variants, skipped = plan_variants(precisions, device)
    support = precision_support(device)
    failures: Dict[str, Dict[str, str]] = {model: {} for model in models}
    pinned = decisions_dir if background_load else None
    if pinned:
        under_load.remove_decisions(pinned, [(model, variant.label) for model in models for variant in variants])
    with under_load.BackgroundLoad(background_load) as load, tempfile.TemporaryDirectory(
            prefix="slim_mp_placement_cache_") as cache_dir:
        if background_load:
            progress(f"background load: {background_load} busy-loop process(es), pids {load.pids}")
        memory = {model: _measure_memory(model, variants, settings, progress, failures[model], cache_dir)
                  for model in models}
        fits = [fit for model in models for fit in _search_batches(model, precisions, settings, cache_dir, progress)]
        results = []
        for model in models:
            results.extend(benchmark_model(model, variants, settings, support, memory[model], progress,
                                           failures[model], pinned, cache_dir))
    run = SuiteRun(device, support, settings, tuple(precisions), tuple(skipped), tuple(results), background_load,
                   batch_fits=tuple(fits))
    if not pinned:
        return run
    progress("background load stopped")
    measured = [r for r in results if benchmark_step.PLACEMENT_OF.get(r.config) is Placement.MEASURED]
    baselines = {r.model: r for r in results if r.label == BASELINE}
    retimings = tuple(under_load.retime_quietly(
        result, baselines.get(result.model), pinned, background_load, settings.batch_size, settings.image_size,
        settings.rounds, settings.warmup, progress) for result in measured)
    return dataclasses.replace(run, quiet_retimings=retimings)
