"""Where op and step timings come from: the disk cache, a fixed timings file, or a measurement now.

The cache (``$SLIM_MP_CACHE_DIR`` or ``~/.cache/slim_mp/placement``) holds one JSON file per (device,
TensorFlow version, precision): lists of numbers by text key, so a second build measures nothing:
an op signature's ``OpTiming.as_numbers()`` (``[float32_ms, low_ms, noise]``, then per gradient of a
convolution or product its float32, low and matrix-product milliseconds), a whole step's ``[ms,
noise]`` (``noise``: the noise of the comparison measured in the same rounds,
``slim_mp.timing.relative_noise``). The file records its ``schema``; one of an older schema or a
damaged one is ignored with a warning and measured again; it is rewritten whole on the next store.

A fixed timings file (``PlacementFiles.timings_file``) gives milliseconds per op type instead,
``{"bfloat16": {"Conv2D": [float32_ms, low_ms], "*": [...]}, ...}`` (``*``: every other type;
``Cast``: ``[0, ms]`` of a cast pair; a third number, optional, is the noise), and optionally per
gradient of a convolution or product, ``"Conv2D:filter": [float32_ms, low_ms, matmul_ms]`` (the
last optional), which lets ``kernel_choice`` pick: decisions that do not depend on this machine, as
the test suite needs.
"""

import hashlib
import os
import warnings
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import tensorflow as tf

from slim_mp.json_files import JsonFileError, ListOf, MappingOf, MaybeMissing, read_json_file, write_json_atomically
from slim_mp.graph_pass.placement.micro_benchmark import PairRounds, micro_benchmark
from slim_mp.graph_pass.placement.options import CACHE_ENV, Measure, PlacementOptions
from slim_mp.graph_pass.gradient_kernels import gradient_roles
from slim_mp.graph_pass.placement.signatures import GradientTiming, OpSignature, OpTiming, op_timing_from

# Schema 3: op timings carry their gradients' own timings (schema 2: their noise; whole steps [ms, noise]).
CACHE_SCHEMA_VERSION = 3
_NUMBER_OR_NONE = (int, float, type(None))
_CACHE_SCHEMA = {"device": str, "timings": MappingOf(ListOf(_NUMBER_OR_NONE)), "schema": MaybeMissing(int)}
_FIXED_SCHEMA = MappingOf(MappingOf(ListOf((int, float))))
_ANY_TYPE = "*"


def cache_dir(configured: Optional[str] = None) -> str:
    """The timing cache folder: ``configured``, else ``$SLIM_MP_CACHE_DIR``, else ``~/.cache/slim_mp/placement``."""
    return configured or os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "slim_mp",
                                                                   "placement")


def _stored_timings(path: str, device: str, warn: bool = True) -> Dict[str, List[float]]:
    """The timings stored at ``path`` for ``device``; empty (with a warning when ``warn``) when the file is
    damaged or of another schema."""
    try:
        stored = read_json_file(path, _CACHE_SCHEMA)
    except FileNotFoundError:
        return {}
    except JsonFileError as error:
        if warn:
            warnings.warn(f"placement: ignoring the damaged timing cache ({error}); measuring again.",
                          stacklevel=4)
        return {}
    if stored.get("schema") != CACHE_SCHEMA_VERSION:
        if warn:
            warnings.warn(f"placement: ignoring the timing cache {path}: it has schema {stored.get('schema', 1)}, "
                          f"this slim_mp reads schema {CACHE_SCHEMA_VERSION} (timings with their gradients'); "
                          "measuring again.", stacklevel=4)
        return {}
    return dict(stored["timings"]) if stored["device"] == device else {}


class TimingCache:
    """Timings of one (device, TensorFlow version, precision) on disk: lists of milliseconds by text key."""

    def __init__(self, folder: str, device: str, precision: tf.DType):
        digest = hashlib.sha1(f"{device}|{tf.__version__}|{precision.name}".encode()).hexdigest()[:16]
        self.path = os.path.join(folder, f"timings_{digest}.json")
        self._header = {"device": device, "tensorflow": tf.__version__, "precision": precision.name}
        self._timings = _stored_timings(self.path, device)

    def get(self, key: str) -> Optional[List[float]]:
        """The stored milliseconds of ``key``, or None."""
        return self._timings.get(key)

    def op_timing(self, signature: OpSignature) -> Optional[OpTiming]:
        """The stored timing of ``signature`` (its gradients' too where they were timed apart), or None."""
        stored = self.get(signature.key())
        return op_timing_from(stored, gradient_roles(signature.op_type)) if stored else None

    def knows(self, signature: OpSignature) -> bool:
        """Whether ``signature`` was timed here, or found impossible to time (stored as ``[]``)."""
        stored = self.get(signature.key())
        return stored == [] or self.op_timing(signature) is not None

    def has_op_timings(self, signatures: Iterable[OpSignature]) -> bool:
        """Whether every one of ``signatures`` is known here (then nothing is micro-benchmarked)."""
        return all(self.knows(s) for s in signatures)

    def add(self, timings: Mapping[str, List[float]]) -> None:
        """Store new timings, merged with what other processes wrote meanwhile; one atomic write."""
        if not timings:
            return
        latest = _stored_timings(self.path, self._header["device"], warn=False)
        latest.update(self._timings)
        latest.update(timings)
        self._timings = latest
        try:
            write_json_atomically(self.path, dict(self._header, timings=latest, schema=CACHE_SCHEMA_VERSION))
        except OSError as error:
            warnings.warn(f"placement: could not write the timing cache {self.path} ({error}); "
                          "the next build measures again.", stacklevel=3)


def fixed_measure(path: str, precision: tf.DType) -> Measure:
    """A ``measure`` answering from the fixed timings file ``path`` (see the module docstring).

    Raises:
      ValueError: (a ``JsonFileError``) when the file is missing, damaged, or lists no ``precision``.
    """
    try:
        by_precision = read_json_file(path, _FIXED_SCHEMA)
    except FileNotFoundError as error:
        raise JsonFileError(path, "does not exist (the fixed timings file)") from error
    table = by_precision.get(precision.name)
    if table is None or any(len(numbers) not in (2, 3) for numbers in table.values()):
        raise JsonFileError(path, f"needs {precision.name!r}: {{op type: [float32_ms, low_ms] or "
                                  "[float32_ms, low_ms, noise]; op type:role: [float32_ms, low_ms(, matmul_ms)]}")

    def timing(signature: OpSignature) -> Optional[OpTiming]:
        numbers = table.get(signature.op_type, table.get(_ANY_TYPE))
        if numbers is None:
            return None
        roles = gradient_roles(signature.op_type)
        given = [table.get(f"{signature.op_type}:{role}") for role in roles]
        gradients = tuple(GradientTiming(role, *pieces) for role, pieces in zip(roles, given)) if all(given) else ()
        return OpTiming(*numbers, *([0.0] if len(numbers) == 2 and gradients else []), gradients)

    def measure(signatures: Sequence[OpSignature], _: tf.DType) -> Dict[OpSignature, OpTiming]:
        found = {s: timing(s) for s in signatures}
        return {s: found_timing for s, found_timing in found.items() if found_timing is not None}

    return measure


def timings_for(signatures: Sequence[OpSignature], cache: TimingCache, options: PlacementOptions,
                precision: tf.DType, before_rounds: Optional[Callable[[], object]] = None
                ) -> Tuple[Dict[OpSignature, OpTiming], List[OpSignature], int]:
    """Timings of ``signatures``: fixed ones, or from the cache, measuring (and caching) the missing ones
    (``before_rounds``: see ``micro_benchmark``).

    Returns:
      (timings, the signatures measured now, how many were found in the cache).
    """
    unique = list(dict.fromkeys(signatures))
    fixed = options.fixed_timings()
    if fixed:
        return fixed_measure(fixed, precision)(unique, precision), [], 0
    missing = [s for s in unique if not cache.knows(s)]
    timings = {s: timing for s, timing in ((s, cache.op_timing(s)) for s in unique) if timing is not None}
    if missing:
        measuring = options.measuring
        rounds = PairRounds(measuring.warmup, measuring.runs, options.tuning.noise.settled, before_rounds,
                            measuring.op_max_elements)
        measure = measuring.measure or (lambda sigs, p: micro_benchmark(sigs, p, measuring.target, rounds))
        measured = measure(missing, precision)
        # What could not be timed (no kernel here, a shape the op refuses) is remembered too, as [].
        cache.add({s.key(): measured[s].as_numbers() if s in measured else [] for s in missing})
        timings.update(measured)
    return timings, missing, len(unique) - len(missing)
