"""Peak memory of one benchmark configuration, measured in a fresh subprocess of its own.

A process's peak never goes down, so each configuration gets its own interpreter: it builds the
train step (``benchmark_step.build_benchmark_step``), runs a few steps and reports its peak. On a
CPU that is the peak resident set size of the interpreter since it started (``VmHWM`` of
``/proc/self/status``; ``ru_maxrss`` where there is no ``/proc``), with the peak after importing
TensorFlow as the baseline; on a GPU it is TensorFlow's allocator peak on
``GPU:0`` (``tf.config.experimental.get_memory_info``), with the bytes in use before building
the step (normally none) as the baseline.

    python -m slim_mp.measure.benchmark.peak_memory '{"config": "slim_mp", "model_name": "lenet",
        "precision": "bfloat16", "batch_size": 2, "image_size": null, "steps": 3}'
"""

import dataclasses
import json
import os
import resource
import subprocess
import sys
from typing import List, Optional, Tuple

import tensorflow as tf

from slim_mp.devices import device_type
from slim_mp.graph_pass import PlacementFiles, PlacementOptions
from slim_mp.measure.benchmark import benchmark_step

_RESULT_PREFIX = "peak_memory_result="
_ERROR_PREFIX = "peak_memory_error="
# The checkout holding slim_mp/ and nets/, put first on the subprocess's path (slim_mp/measure/benchmark/ ->
# checkout).
_REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir))
_TIMEOUT_S = 3600
_EXIT_BAD_INPUT = 2
RSS_METHOD = "peak resident set size of the process since it started (VmHWM of /proc/self/status)"
RUSAGE_METHOD = "peak resident set size of the process (resource.getrusage ru_maxrss)"
_STATUS_FILE = "/proc/self/status"
GPU_METHOD = "peak bytes allocated on GPU:0 by TensorFlow (tf.config.experimental.get_memory_info)"


@dataclasses.dataclass(frozen=True)
class MemoryRequest:
    """Which train step to build and how many steps to run it; ``cache_dir``: the placement's timing cache."""

    config: str
    model_name: str
    precision: str
    batch_size: int
    image_size: Optional[int]
    steps: int
    cache_dir: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class MemoryMeasurement:
    """Peak bytes of one configuration, the bytes already in use before building it, and how both were measured.

    ``pass_seconds``: how long the slim_mp pass took in that fresh process (None without a pass).
    """

    peak_bytes: int
    baseline_bytes: int
    method: str
    pass_seconds: Optional[float] = None


def peak_rss() -> Tuple[int, str]:
    """This interpreter's peak resident set size in bytes since it started, and how it was read.

    Linux keeps ``ru_maxrss`` across fork and exec, so a subprocess started by a process of 2.5 GiB
    reports at least 2.5 GiB and every step smaller than its parent measures 0 above baseline. The
    high-water mark of ``/proc/self/status`` (``VmHWM``) starts afresh with the new program. Without
    ``/proc``, ``ru_maxrss`` (macOS reports bytes, other systems KiB).
    """
    try:
        with open(_STATUS_FILE, encoding="ascii") as status:
            kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        return kib * 1024, RSS_METHOD
    except (OSError, StopIteration, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return (peak if sys.platform == "darwin" else peak * 1024), RUSAGE_METHOD


def measure_here(request: MemoryRequest) -> MemoryMeasurement:
    """Build and run ``request`` in this process and return its peak (meaningful only in a fresh process)."""
    on_gpu = device_type() == "GPU"
    if on_gpu:
        tf.config.experimental.reset_memory_stats("GPU:0")
        baseline = tf.config.experimental.get_memory_info("GPU:0")["current"]
    else:
        baseline, _ = peak_rss()
    precision = tf.as_dtype(request.precision)
    options = PlacementOptions(PlacementFiles(cache_dir=request.cache_dir)) if request.cache_dir else None
    step = benchmark_step.build_benchmark_step(request.config, request.model_name, precision,
                                               request.batch_size, request.image_size, placement_options=options)
    for _ in range(request.steps):
        step.session.run(step.train_op)
    if on_gpu:
        return MemoryMeasurement(tf.config.experimental.get_memory_info("GPU:0")["peak"], baseline, GPU_METHOD,
                                 step.pass_seconds)
    peak, method = peak_rss()
    return MemoryMeasurement(peak, baseline, method, step.pass_seconds)


def _tagged_lines(text: str, prefix: str) -> List[str]:
    """The lines of ``text`` that start with ``prefix``, without it."""
    return [line[len(prefix):] for line in text.splitlines() if line.startswith(prefix)]


def measure_in_subprocess(request: MemoryRequest) -> MemoryMeasurement:
    """Run ``measure_here`` in a fresh Python process.

    Bad input there (say, an image size too small for the network) is a ValueError with its message
    here; any other failure is a RuntimeError carrying the end of the subprocess's error output.
    """
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [_REPO_ROOT, os.environ.get("PYTHONPATH")])))
    environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    process = subprocess.run(
        [sys.executable, "-m", "slim_mp.measure.benchmark.peak_memory", json.dumps(dataclasses.asdict(request))],
        capture_output=True, text=True, env=environment, timeout=_TIMEOUT_S)
    results = _tagged_lines(process.stdout, _RESULT_PREFIX)
    errors = _tagged_lines(process.stderr, _ERROR_PREFIX)
    if process.returncode == _EXIT_BAD_INPUT and errors:
        raise ValueError(f"{request.model_name} ({request.config}, batch_size={request.batch_size}, "
                         f"image_size={request.image_size}) cannot be built: {errors[-1]}")
    if process.returncode != 0 or not results:
        raise RuntimeError(f"The memory measurement of {request.config} on {request.model_name} failed "
                           f"(exit status {process.returncode}):\n{process.stderr[-3000:]}")
    return MemoryMeasurement(**json.loads(results[-1]))


def _main(request_json: str) -> None:
    """Measure the JSON-encoded request and print the result; bad input exits with its message alone."""
    try:
        measurement = measure_here(MemoryRequest(**json.loads(request_json)))
    except (ValueError, TypeError) as error:
        print(_ERROR_PREFIX + " ".join(str(error).split()), file=sys.stderr)
        sys.exit(_EXIT_BAD_INPUT)
    print(_RESULT_PREFIX + json.dumps(dataclasses.asdict(measurement)), flush=True)


if __name__ == "__main__":
    _main(sys.argv[1])
