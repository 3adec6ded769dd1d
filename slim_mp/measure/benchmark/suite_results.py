"""The records of a benchmark run, at the bottom of the tool: what was asked, what each variant measured.

``Variant`` and ``Settings`` say what runs; ``VariantResult`` is one (model, variant)'s measurements,
``QuietRetiming`` a placement decided under a background load and re-timed quiet, ``BatchFit`` the
largest batch within a memory budget, ``SuiteRun``
everything a report needs. Plain frozen values: the suite fills them, the reports read them.
"""

import dataclasses
from typing import Dict, Optional, Tuple

import tensorflow as tf

from slim_mp.devices import DeviceInfo, PrecisionSupport
from slim_mp.precision import short_name

BASELINE = "float32"


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


def check_memory_budget(budget_mb: float) -> float:
    """``budget_mb`` if it is a positive number of MiB; else ValueError naming ``--memory_budget_mb``."""
    if isinstance(budget_mb, bool) or not isinstance(budget_mb, (int, float)) or not budget_mb > 0:
        raise ValueError(f"--memory_budget_mb={budget_mb!r} is not a positive number of MiB; pass e.g. "
                         "--memory_budget_mb=2048 (the process's peak above its baseline), or leave it unset.")
    return float(budget_mb)


@dataclasses.dataclass(frozen=True)
class Settings:
    """What to run: batch size, input size (None: each network's default), timed rounds, warm-up and memory steps."""

    batch_size: int
    image_size: Optional[int]
    rounds: int
    warmup: int
    memory_steps: int = 3
    memory_budget_mb: Optional[float] = None

    def __post_init__(self) -> None:
        for name, minimum in (("batch_size", 1), ("rounds", 1), ("warmup", 0), ("memory_steps", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name}={value!r} is invalid; pass an integer of at least {minimum}.")
        if self.image_size is not None and (not isinstance(self.image_size, int) or self.image_size < 1):
            raise ValueError(f"image_size={self.image_size!r} is invalid; pass a positive integer or leave it unset.")
        if self.memory_budget_mb is not None:
            check_memory_budget(self.memory_budget_mb)


@dataclasses.dataclass(frozen=True)
class VariantResult:
    """The measurements of one variant on one model; ``unavailable`` says why a variant has none."""

    model: str
    label: str
    config: str
    precision: str
    native: bool
    median_seconds: Optional[float]
    images_per_second: Optional[float]
    speedup_vs_float32: Optional[float]
    step_seconds: Tuple[float, ...]
    casts_executed: Optional[int]
    casts_in_graph: Optional[int]
    pass_seconds: Optional[float]
    peak_memory_bytes: Optional[int]
    baseline_memory_bytes: Optional[int]
    memory_method: Optional[str]
    unavailable: Optional[str] = None
    placement_float32_ops: Optional[int] = None
    cold_pass_seconds: Optional[float] = None
    fusions: Tuple[Tuple[str, int], ...] = ()


@dataclasses.dataclass(frozen=True)
class BatchFit:
    """The largest batch of one (model, variant) within a memory budget, and every batch the search measured.

    ``peaks``: (batch size, peak bytes above baseline) per batch measured, by batch size.
    ``largest_batch``: None when even batch 1 does not fit. ``unavailable``: why the search failed.
    """

    model: str
    label: str
    budget_bytes: int
    largest_batch: Optional[int]
    peaks: Tuple[Tuple[int, int], ...]
    max_batch: int
    unavailable: Optional[str] = None

    def peak_of(self, batch: Optional[int]) -> Optional[int]:
        """The measured bytes above baseline of ``batch``, or None if it was not measured."""
        return dict(self.peaks).get(batch)

    @property
    def first_over(self) -> Optional[int]:
        """The smallest measured batch over the budget (the answer plus one after a full search)."""
        over = [batch for batch, peak in self.peaks if peak > self.budget_bytes]
        return min(over) if over else None


@dataclasses.dataclass(frozen=True)
class QuietRetiming:
    """A placement decided under load, re-timed beside float32 with the load stopped.

    ``*_ratio``: the slim_mp step's time over float32's (median of the per-round ratios; below 1 is
    faster), under load (from the suite's timing) and quiet. ``unavailable``: why it could not be re-timed.
    """

    model: str
    label: str
    background_load: int
    decisions_file: str
    float32_ops: Optional[int] = None
    low_ops: Optional[int] = None
    check: Optional[str] = None
    loaded_ratio: Optional[float] = None
    quiet_float32_ms: Optional[float] = None
    quiet_slim_mp_ms: Optional[float] = None
    quiet_ratio: Optional[float] = None
    quiet_step_seconds: Optional[dict] = None
    unavailable: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class SuiteRun:
    """Everything a report needs: the device and its precision support, what ran, and the results."""

    device: DeviceInfo
    support: Dict[str, PrecisionSupport]
    settings: Settings
    precisions: Tuple[str, ...]
    skipped: Tuple[str, ...]
    results: Tuple[VariantResult, ...]
    background_load: int = 0
    quiet_retimings: Tuple[QuietRetiming, ...] = ()
    batch_fits: Tuple[BatchFit, ...] = ()


@dataclasses.dataclass(frozen=True)
class ClusterResult:
    """One (model, variant, layout) of a cluster benchmark: its step time, its fused kernels and, in the cluster, its
    bytes across the wire per step per worker (one traced step after the timed rounds).

    ``layout``: ``process`` (one process, the variables in it) or ``cluster`` (the variables on a parameter
    server). ``label``: the timing's name (``float32``, ``slim_mp_bf16``, ``ps_float32``, ...).
    ``sent_bytes``/``received_bytes``: what the worker sent to / received from the other tasks (None in one
    process); ``wire_routes``: every (source task, destination task, tensors, bytes) of the traced step.
    """

    model: str
    label: str
    variant: Variant
    layout: str
    native: bool
    median_seconds: Optional[float]
    images_per_second: Optional[float]
    speedup_vs_float32: Optional[float]
    step_seconds: Tuple[float, ...]
    fusions: Tuple[Tuple[str, int], ...] = ()
    sent_bytes: Optional[int] = None
    received_bytes: Optional[int] = None
    wire_routes: Tuple[dict, ...] = ()
    unavailable: Optional[str] = None

    @property
    def wire_bytes(self) -> Optional[int]:
        """Bytes across the wire per step for this worker, both directions (None in one process)."""
        return None if self.sent_bytes is None else self.sent_bytes + self.received_bytes


@dataclasses.dataclass(frozen=True)
class ClusterRun:
    """A cluster benchmark: what ran, where the parameter server sat (``link``), and per (model, variant, layout) a
    result. ``link_gbits``: the shaped link's Gbit/s each way, None on loopback; ``link_note``: why a shaped link
    asked for could not be made (the run then used loopback), else empty."""

    device: DeviceInfo
    support: Dict[str, PrecisionSupport]
    settings: Settings
    precisions: Tuple[str, ...]
    link: str
    link_gbits: Optional[float]
    results: Tuple[ClusterResult, ...]
    link_note: str = ""
