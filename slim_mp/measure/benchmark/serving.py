"""Time served models as a server runs them: float32, the low-precision exports and grappler's AMP, per batch size.

Every variant (``serving_options.plan_serving_variants``) is opened once, in a session of its own
(``served_models.load_served_model``), and run once untimed to read which kernels it executes: a
grappler AMP variant under which no conv/matmul-class op runs in its precision (the CPU cannot
honour it: bfloat16 with oneDNN off) is reported as such, not timed. Then, batch size by batch size,
all variants are timed interleaved (``benchmark_step.interleaved_times``: the project's one clock,
rotating rounds), each request a fixed batch of random images of the model's input size, in
[-1, 1] as preprocessing leaves them, fed from host memory; the fetch is the class probabilities.
Per variant and batch size: latency p50 and p99 over the timed requests, images/s (batch size /
p50), and the speed-up over the float32 model of the same format with its noise
(``slim_mp.timing.paired_ratio`` and ``relative_noise`` over the same rounds) and the noise rule's
verdict (``NoiseRule``: faster, slower or within noise).

Leaves alone: the session's threads (TensorFlow's defaults, as a plain ``tf.compat.v1.Session``).
"""

import dataclasses
import functools
import os
import shutil
import tempfile
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from slim_mp.devices import DeviceInfo, PrecisionSupport, detect_device, device_type, precision_support
from slim_mp.graph_pass import BFLOAT16_CLASSES, FLOAT16_CLASSES, NoiseRule
from slim_mp.measure.benchmark.benchmark_step import grappler_amp_config, interleaved_times
from slim_mp.measure.benchmark.served_models import (LoadedModel, ServedModel, export_served_models,
                                                     initial_weights_checkpoint, load_served_model)
from slim_mp.measure.benchmark.serving_options import (EXPORTS_FOLDER, ServingOptions, ServingVariant, export_config,
                                                       plan_serving_variants, reference_of)
from slim_mp.measure.benchmark.suite import failure_reason
from slim_mp.op_families import op_family
from slim_mp.precision import LOW_PRECISIONS
from slim_mp.timing import paired_ratio, relative_noise

tf1 = tf.compat.v1
Progress = Callable[[str], None]
# The seed of the random images every request feeds.
IMAGES_SEED = 0
PERCENTILES = (50, 99)
# The verdict of the float32 model each variant is compared with.
REFERENCE = "reference"
FRESH_WEIGHTS = "freshly initialised (no --checkpoint_path): serving time does not depend on the weights' values"


@dataclasses.dataclass(frozen=True)
class ServingResult:
    """One variant at one batch size: its requests' milliseconds in round order and what they give, or why not.

    ``speedup_vs_float32``: median over rounds of the float32 model's milliseconds over this
    variant's; ``noise``: ``relative_noise`` of the two; ``verdict``: the noise rule's (``REFERENCE``
    for float32 itself). ``low_ops_run`` / ``compute_ops_run``: the conv/matmul-class kernels the
    variant executed in float16 or bfloat16, and all of them.
    """

    key: str
    label: str
    format: str
    precision: str
    batch_size: int
    file_bytes: int
    step_ms: Tuple[float, ...] = ()
    p50_ms: Optional[float] = None
    p99_ms: Optional[float] = None
    images_per_second: Optional[float] = None
    speedup_vs_float32: Optional[float] = None
    noise: Optional[float] = None
    verdict: Optional[str] = None
    low_ops_run: Optional[int] = None
    compute_ops_run: Optional[int] = None
    unavailable: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class ServingRun:
    """Everything a report needs: the device, the options, the weights, the files and every result."""

    device: DeviceInfo
    support: Dict[str, PrecisionSupport]
    options: ServingOptions
    weights: str
    models: Tuple[ServedModel, ...]
    results: Tuple[ServingResult, ...]


def compute_ops_run(metadata: tf1.RunMetadata) -> Tuple[int, int]:
    """(conv/matmul-class kernels executed in float16 or bfloat16, all of them): the allow ops of the pass's
    tables, found by ``op_family`` among the partition graphs' nodes (after grappler's and oneDNN's rewrites)."""
    allow = BFLOAT16_CLASSES.allow | FLOAT16_CLASSES.allow
    nodes = [node for graph in metadata.partition_graphs for node in graph.node if op_family(node.op) in allow]
    low = {dtype.as_datatype_enum for dtype in LOW_PRECISIONS}
    return sum(1 for node in nodes if "T" in node.attr and node.attr["T"].type in low), len(nodes)


def verdict(speedup: float, noise: float, rule: NoiseRule = NoiseRule()) -> str:
    """``faster``, ``slower`` or ``within noise``: whether the speed-up exceeds the rule's bound for ``noise``."""
    if rule.is_noise(min(1.0, speedup), max(1.0, speedup), noise):
        return "within noise"
    return "faster" if speedup > 1.0 else "slower"


def random_images(shape: Sequence[Optional[int]], batch_size: int) -> np.ndarray:
    """A request: ``batch_size`` random images of the input's size, in [-1, 1], in host memory."""
    return np.random.RandomState(IMAGES_SEED).uniform(-1, 1, [batch_size, *shape[1:]]).astype(np.float32)


def _amp_option(precision: str) -> str:
    """The name of the grappler option ``grappler_amp_config`` turns on for ``precision`` here."""
    rewrite_options = grappler_amp_config(tf.as_dtype(precision), device_type()).graph_options.rewrite_options
    return next(field.name for field, _ in rewrite_options.ListFields())


def _open(variant: ServingVariant, batch_size: int) -> Tuple[LoadedModel, Tuple[int, int]]:
    """``variant`` loaded, and the kernels its first (untimed) request ran; ValueError when AMP changed nothing."""
    config = grappler_amp_config(tf.as_dtype(variant.amp), device_type()) if variant.amp else None
    loaded = load_served_model(variant.model, config)
    metadata = tf1.RunMetadata()
    try:
        loaded.session.run(loaded.probabilities, {loaded.images: random_images(variant.model.input_shape, batch_size)},
                           options=tf1.RunOptions(output_partition_graphs=True), run_metadata=metadata)
        low, total = compute_ops_run(metadata)
        if variant.amp and not low:
            raise ValueError(f"not honoured here: grappler's {_amp_option(variant.amp)} ran none of the {total} "
                             f"conv/matmul ops in {variant.amp}")
    except (ValueError, tf.errors.OpError):
        loaded.session.close()
        raise
    return loaded, (low, total)


def _fits(variant: ServingVariant, batch_size: int) -> Optional[str]:
    """Why ``variant`` cannot take ``batch_size`` (an export with a fixed ``--batch_size``), or None."""
    fixed = variant.model.fixed_batch
    return None if fixed in (None, batch_size) else f"exported for batch {fixed} only (--batch_size)"


def _reason(variant: ServingVariant, reference: ServingVariant, batch_size: int, failed: Dict[str, str],
            ) -> Optional[str]:
    """Why ``variant`` is not timed at ``batch_size`` (it or its float32 reference cannot run there), or None."""
    own = failed.get(variant.key) or _fits(variant, batch_size)
    if own:
        return own
    base = failed.get(reference.key) or _fits(reference, batch_size)
    return f"its float32 reference cannot run: {base}" if base else None


def _result(variant: ServingVariant, batch_size: int, times: Dict[str, List[float]], reference: ServingVariant,
            ops: Tuple[int, int]) -> ServingResult:
    own, base = times[variant.key], times[reference.key]
    p50, p99 = (float(np.percentile(own, q)) for q in PERCENTILES)
    speedup = paired_ratio(base, own)
    noise = relative_noise(own, base)
    return ServingResult(**_common(variant, batch_size), step_ms=tuple(own), p50_ms=p50, p99_ms=p99,
                         images_per_second=batch_size / p50 * 1000.0, speedup_vs_float32=speedup, noise=noise,
                         verdict=REFERENCE if variant == reference else verdict(speedup, noise),
                         low_ops_run=ops[0], compute_ops_run=ops[1])


def _common(variant: ServingVariant, batch_size: int) -> dict:
    return dict(key=variant.key, label=variant.label, format=variant.model.format, precision=variant.precision,
                batch_size=batch_size, file_bytes=variant.model.size_bytes)


def time_variants(variants: Sequence[ServingVariant], options: ServingOptions,
                  progress: Progress) -> List[ServingResult]:
    """Open every variant once, then time them interleaved, batch size by batch size (see the module docstring)."""
    opened: Dict[str, Tuple[LoadedModel, Tuple[int, int]]] = {}
    failed: Dict[str, str] = {}
    results = []
    try:
        for variant in variants:
            try:
                opened[variant.key] = _open(variant, variant.model.fixed_batch or options.batch_sizes[0])
            except (ValueError, tf.errors.OpError) as error:
                failed[variant.key] = failure_reason(error)
                progress(f"{variant.key}: n/a ({failed[variant.key]})")
                continue
            low, total = opened[variant.key][1]
            progress(f"{variant.key}: loaded {variant.model.path}; conv/matmul ops run in low precision: "
                     f"{low}/{total}")
        for batch_size in options.batch_sizes:
            reasons = {v.key: _reason(v, reference_of(v, variants), batch_size, failed) for v in variants}
            runs = {v.key: functools.partial(opened[v.key][0].predictor(), random_images(v.model.input_shape,
                                                                                          batch_size))
                    for v in variants if not reasons[v.key]}
            seconds = interleaved_times(runs, options.rounds, options.warmup,
                                        progress=lambda line, b=batch_size: progress(f"[batch {b}] {line}"),
                                        ) if runs else {}
            times = {key: [value * 1000.0 for value in values] for key, values in seconds.items()}
            for variant in variants:
                if reasons[variant.key]:
                    results.append(ServingResult(**_common(variant, batch_size), unavailable=reasons[variant.key]))
                else:
                    results.append(_result(variant, batch_size, times, reference_of(variant, variants),
                                           opened[variant.key][1]))
    finally:
        for loaded, _ in opened.values():
            loaded.session.close()
    return results


def _exported(options: ServingOptions, progress: Progress) -> Tuple[List[ServedModel], str]:
    """Export the network in float32 and each precision into ``EXPORTS_FOLDER``: (models, what weights).

    The folder is new (``check_serving_options``); an export that fails removes it, leaving no half-written model.
    """
    folder = os.path.join(options.output_dir, EXPORTS_FOLDER)
    os.makedirs(folder)
    try:
        if options.checkpoint_path:
            weights = f"frozen from --checkpoint_path={options.checkpoint_path}"
            models = export_served_models(export_config(options, options.checkpoint_path), options.precisions,
                                          folder, progress)
            return models, weights
        with tempfile.TemporaryDirectory(prefix="slim_mp_initial_weights_") as scratch:
            checkpoint = initial_weights_checkpoint(export_config(options, None), scratch)
            models = export_served_models(export_config(options, checkpoint), options.precisions, folder, progress)
        return models, FRESH_WEIGHTS
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def run_serving_benchmark(options: ServingOptions, given: Sequence[ServedModel], progress: Progress) -> ServingRun:
    """Export (unless ``given`` files), then time every variant at every batch size (``check_serving_options``
    first: ``options`` with canonical precisions, ``given`` the checked files)."""
    device = detect_device()
    if given:
        models, weights = list(given), "as frozen in the given files"
    else:
        models, weights = _exported(options, progress)
    progress(f"weights: {weights}")
    variants = plan_serving_variants(models, options.precisions)
    results = time_variants(variants, options, progress)
    return ServingRun(device, precision_support(device), options, weights, tuple(models), tuple(results))
