"""How the measured placement is asked for and tuned: the placement names and ``PlacementOptions``.

``PlacementOptions`` holds three small frozen records, one per question: where the files go
(``PlacementFiles``), what may be measured, where and how (``PlacementMeasuring``), and the search's
tuning (``PlacementTuning``, with the noise rule, ``NoiseRule``). Every field, its default and why it
is what it is are told once, in docs/placement.md's tuning table (a test keeps the table and the
records alike). The placement's other modules hold no tuning: their few constants are facts (file
schemas, op types, the fewest rounds a spread can be read from), not knobs.
"""

import dataclasses
import enum
import os
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import tensorflow as tf

from slim_mp.config_fields import ArgumentError, argument
from slim_mp.graph_pass.placement.noise import NoiseRule
from slim_mp.graph_pass.placement.candidate import Candidate
from slim_mp.graph_pass.placement.signatures import OpSignature, OpTiming
from slim_mp.graph_pass.placement.target import MeasuringTarget
from slim_mp.timing import Timed


class Placement(enum.StrEnum):
    """The placements a rewrite accepts; members are their own strings (``Placement.MEASURED == "measured"``)."""

    MEASURED = "measured"
    STATIC = "static"


PLACEMENTS = tuple(placement.value for placement in Placement)
PLACEMENT_ENV = "SLIM_MP_PLACEMENT"
CACHE_ENV = "SLIM_MP_CACHE_DIR"
TIMINGS_FILE_ENV = "SLIM_MP_TIMINGS_FILE"

# measure(signatures, precision) -> timing per signature; signatures it cannot time are left out.
Measure = Callable[[Sequence[OpSignature], tf.DType], Dict[OpSignature, OpTiming]]
# measure_steps(candidates, reference) -> per candidate its fastest whole step and the noise of comparing it
# with candidate ``reference`` (timed in the same rounds); None for one that does not run.
MeasureSteps = Callable[[Sequence[Candidate], int], List[Optional[Timed]]]


def default_placement() -> str:
    """``measured``, unless ``$SLIM_MP_PLACEMENT`` names another placement."""
    return resolve_placement(os.environ.get(PLACEMENT_ENV) or Placement.MEASURED.value)


def resolve_placement(placement: Optional[str]) -> str:
    """``placement`` checked against ``PLACEMENTS`` (None: the default), as the plain string of its ``Placement``
    (so a config's repr and a flag's help print it as before).

    Raises:
      ValueError: naming the accepted values when ``placement`` is none of them.
    """
    if placement is None:
        return default_placement()
    if placement not in PLACEMENTS:
        accepted = " or ".join(repr(name) for name in PLACEMENTS)
        raise ValueError(f"placement={placement!r} is not a placement; use {accepted}.")
    return Placement(placement).value


@dataclasses.dataclass(frozen=True)
class PlacementFiles:
    """Where the placement's files go: the timing cache, the decisions file (and how a worker waits for the
    chief's), and a fixed timings file used instead of measuring."""

    cache_dir: Optional[str] = None
    decisions_file: Optional[str] = None
    write_decisions: bool = True
    wait_seconds: float = 0.0
    poll_seconds: float = 0.5
    timings_file: Optional[str] = None

    def fixed_timings_file(self) -> Optional[str]:
        """``timings_file``, else ``$SLIM_MP_TIMINGS_FILE``, else None (measure on this device)."""
        return self.timings_file or os.environ.get(TIMINGS_FILE_ENV) or None


@dataclasses.dataclass(frozen=True)
class PlacementMeasuring:
    """What may be measured, where and how: the target the step runs on, the measuring functions (tests inject
    fakes), whether whole steps and the ops after the allow ops are timed, the size of what is timed, and the
    batches an inference graph whose batch is unknown is timed at (``serving_batch_sizes``, ``served_batches``).

    Raises:
      ArgumentError: naming ``serving_batch_sizes`` when it is empty or holds a size below 1.
    """

    target: MeasuringTarget = MeasuringTarget()
    measure: Optional[Measure] = None
    measure_steps: Optional[MeasureSteps] = None
    time_steps: bool = True
    time_followers: bool = False
    warmup: int = 1
    runs: int = 7
    step_warmup: int = 1
    cast_sizes: Tuple[int, int] = (1 << 14, 1 << 20)
    op_max_elements: int = 1 << 20
    step_max_batch: int = 4
    serving_batch_sizes: Tuple[int, ...] = (1, 32)

    def __post_init__(self) -> None:
        sizes = tuple(self.serving_batch_sizes)
        if not sizes or any(isinstance(size, bool) or not isinstance(size, int) or size < 1 for size in sizes):
            shown = ",".join(str(size) for size in sizes) or "(none)"
            raise ArgumentError(f"{argument('serving_batch_sizes')}={shown}: the batch sizes an inference graph "
                                "of unknown batch is timed at must be one or more positive integers, e.g. 1,32.")
        object.__setattr__(self, "serving_batch_sizes", tuple(sorted(set(sizes))))


@dataclasses.dataclass(frozen=True)
class PlacementTuning:
    """The search's tuning: the estimate's margin, which candidates are timed as whole steps and for how
    many rounds, and when a timed difference counts (``noise``)."""

    low_precision_margin: float = 0.20
    verify_window: float = 0.35
    max_timed_candidates: int = 4
    step_timing_ms: float = 2500.0
    min_step_runs: int = 3
    max_step_runs: int = 21
    noise: NoiseRule = NoiseRule()


@dataclasses.dataclass(frozen=True)
class PlacementOptions:
    """How the measured placement works: where its files go (``files``), what it may measure and how
    (``measuring``), and its tuning (``tuning``); every field in docs/placement.md's tuning table.

    Example: ``PlacementOptions(PlacementFiles(decisions_file="run/placement.json"))`` pins the decision of
    a run; ``PlacementOptions(measuring=PlacementMeasuring(time_steps=False))`` decides on the estimate alone.
    """

    files: PlacementFiles = PlacementFiles()
    measuring: PlacementMeasuring = PlacementMeasuring()
    tuning: PlacementTuning = PlacementTuning()

    def __post_init__(self) -> None:
        for name, kind in (("files", PlacementFiles), ("measuring", PlacementMeasuring), ("tuning", PlacementTuning)):
            value = getattr(self, name)
            if not isinstance(value, kind):
                raise TypeError(f"PlacementOptions({name}=...) must be a {kind.__name__}, got {type(value).__name__}.")

    def placed(self, ops: Iterable[tf.Operation]) -> "PlacementOptions":
        """These options, the target's device the one most of ``ops`` are placed on when it names none
        (``MeasuringTarget.placed``): where the painting and every timing take their device from."""
        target = self.measuring.target.placed(ops)
        return dataclasses.replace(self, measuring=dataclasses.replace(self.measuring, target=target))

    def fixed_timings(self) -> Optional[str]:
        """The fixed timings file the op timings come from, or None when they are measured.

        The one rule for it: an injected ``measuring.measure`` (a test's fake) wins over a fixed file,
        which wins over measuring. Fixed timings say nothing about this machine, so with them no whole
        step is timed either (``times_whole_steps``).
        """
        return None if self.measuring.measure is not None else self.files.fixed_timings_file()

    def times_whole_steps(self) -> bool:
        """Whether whole steps are timed: ``measuring.time_steps`` is on and the op timings are not fixed."""
        return self.measuring.time_steps and not self.fixed_timings()
