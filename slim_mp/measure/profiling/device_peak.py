"""This device's attainable GFLOP/s for a large convolution and a large matrix product, per precision.

The step profiler reports each convolution's and matrix product's GFLOP/s against these numbers:
an op far below the peak of its precision is limited by memory, layout or a small shape, not by
arithmetic. Measured once per device, precision and TensorFlow version and cached as JSON
beside the placement's op timings (``$SLIM_MP_CACHE_DIR`` or ``~/.cache/slim_mp/placement``, file
``device_peak.json``); a damaged cache file is measured again with a warning.

An emulated precision (float16 on any CPU, bfloat16 on a CPU without AVX512-BF16/AMX) is measured
on smaller shapes and marked ``emulated``: TensorFlow's float16 CPU matrix product is about a
thousand times slower than float32's, so the full-size one would take minutes.
"""

import dataclasses
import os
from typing import Dict, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from slim_mp.devices import DeviceInfo, precision_support
from slim_mp.graph_pass import timing_cache_dir
from slim_mp.timing import median_ms
from slim_mp.json_files import JsonFileError, MappingOf, read_json_file, write_json_atomically

tf1 = tf.compat.v1

CACHE_FILE_NAME = "device_peak.json"
_CACHE_SCHEMA = {"peaks": MappingOf({"conv_gflops": (int, float), "matmul_gflops": (int, float), "emulated": bool})}
# The benchmarked shapes: a 3x3 convolution of 256 channels at 28x28 (a ResNet block3 layer at
# batch 8) and a square 1024 matrix product.
CONV_INPUT = (8, 28, 28, 256)
CONV_FILTER = (3, 3, 256, 256)
MATMUL_SIZE = 1024
# The same benchmarks for an emulated precision: one image, a 256 matrix product.
EMULATED_CONV_INPUT = (1, 28, 28, 256)
EMULATED_MATMUL_SIZE = 256


@dataclasses.dataclass(frozen=True)
class DevicePeak:
    """Attainable GFLOP/s of ``precision`` on this device."""

    precision: str
    conv_gflops: float
    matmul_gflops: float
    emulated: bool = False


def measure_peak(precision: str, emulated: bool = False, runs: int = 5) -> DevicePeak:
    """Time the benchmark convolution and matrix product in ``precision`` (inputs stay on the device).

    ``emulated`` uses the small shapes (see the module docstring).
    """
    dtype = tf.as_dtype(precision)
    conv_input = EMULATED_CONV_INPUT if emulated else CONV_INPUT
    size = EMULATED_MATMUL_SIZE if emulated else MATMUL_SIZE
    rng = np.random.RandomState(0)
    graph = tf.Graph()
    with graph.as_default():
        shapes = (conv_input, CONV_FILTER, (size, size), (size, size))
        low = [tf.Variable(tf.cast(tf.constant(rng.uniform(-1, 1, shape).astype(np.float32)), dtype))
               for shape in shapes]
        conv = tf.reduce_sum(tf.nn.conv2d(low[0], low[1], strides=1, padding="SAME"))
        matmul = tf.reduce_sum(tf.matmul(low[2], low[3]))
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            conv_seconds = median_ms(lambda: session.run(conv.op), runs) / 1000.0
            matmul_seconds = median_ms(lambda: session.run(matmul.op), runs) / 1000.0
    conv_flops = 2 * int(np.prod(conv_input[:3])) * int(np.prod(CONV_FILTER))
    matmul_flops = 2 * size ** 3
    return DevicePeak(precision, conv_flops / conv_seconds / 1e9, matmul_flops / matmul_seconds / 1e9, emulated)


def _cache_key(device: DeviceInfo, precision: str) -> str:
    return f"{device.describe()} | TensorFlow {tf.__version__} | {precision}"


def _read_cache(path: str) -> Dict[str, dict]:
    try:
        return read_json_file(path, _CACHE_SCHEMA)["peaks"]
    except FileNotFoundError:
        return {}
    except JsonFileError as error:
        logging.warning("Ignoring the damaged device-peak cache (%s); measuring again.", error)
        return {}


def device_peak(device: DeviceInfo, precision: str, cache_dir: Optional[str] = None) -> DevicePeak:
    """The cached (else measured and cached) peak of ``precision`` on ``device``."""
    emulated = precision != "float32" and not precision_support(device)[precision].native
    path = os.path.join(timing_cache_dir(cache_dir), CACHE_FILE_NAME)
    peaks = _read_cache(path)
    key = _cache_key(device, precision)
    if key not in peaks:
        peak = measure_peak(precision, emulated)
        peaks[key] = dataclasses.asdict(peak)
        del peaks[key]["precision"]
        write_json_atomically(path, {"peaks": peaks})
    return DevicePeak(precision, **peaks[key])
