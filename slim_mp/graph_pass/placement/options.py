"""How the measured placement is asked for and tuned: the placement names and ``PlacementOptions``.

Every tuning value of the placement lives in ``PlacementOptions``, so a caller or a test changes
one field, and each rule reads its value from one place. The placement's other modules hold no
tuning: their few constants are facts (file schemas, op types, the fewest rounds a spread can be
read from), not knobs.
"""

import dataclasses
import enum
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

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
class PlacementOptions:
    """Where timings and decisions live, how to measure, and the search's tuning.

    Files: ``cache_dir`` holds the timing cache (default ``$SLIM_MP_CACHE_DIR`` or
    ``~/.cache/slim_mp/placement``). ``decisions_file``: reuse the demoted ops recorded there; if it does
    not exist, measure and (when ``write_decisions``) write it. A reader that may not write (a non-chief
    worker) waits up to ``wait_seconds`` for the writer. ``timings_file`` (default
    ``$SLIM_MP_TIMINGS_FILE``): fixed per-op-type timings used instead of measuring (reproducible
    decisions: the test suite sets it); whole steps are then not timed (``fixed_timings``).

    Measuring: ``measure`` / ``measure_steps`` replace the micro-benchmarks and the whole-step timing
    (tests pass fakes). ``target``: where the step will run (``MeasuringTarget``: device, session
    options, training or inference); everything is timed there. ``time_steps``: time close candidates
    as whole steps and check the chosen placement as a whole step against all float32 and the
    static placement (``step_check``); False decides on the per-op estimate alone. ``warmup`` /
    ``runs``: the micro-benchmarks' untimed runs and timed interleaved rounds (one warm-up: the first
    run pays oneDNN's primitive creation and the allocations, and of the timed rounds only the
    fastest counts); ``step_warmup``: the untimed runs of each whole step (its first run pays
    grappler and the executor).

    Tuning: ``low_precision_margin``: low times count this fraction more in the estimate (what goes
    low around the allow ops is not timed). ``verify_window``: candidates whose estimate is within
    this fraction of the best are timed as whole steps, at most ``max_timed_candidates``.
    ``noise``: the noise rule (``NoiseRule``: its floor, the 1% rule, and the factors at which
    rounds settle, the search's rounds answer the check, and two rounds are clear), so candidates
    whose estimates all lie within the floor are not timed, and a placement with low-precision ops
    must beat the all-float32 step beyond the noise. Whole steps get as many timed runs as fit
    ``step_timing_ms`` for all candidates, between ``min_step_runs`` and ``max_step_runs``, and settle no
    earlier than round ``settle_step_runs`` (7): their verdict is the guarantee, and the spread of three
    ratios can be small by luck (a big network gets only ``min_step_runs`` rounds anyway); the search's batch,
    which only ranks the candidates, settles from the third. ``cast_sizes``: element counts of the two casts
    timed to fit the cast cost model.
    ``op_max_elements``: a convolution or product whose first input holds more elements is timed on
    part of its batch, its times scaled up (``micro_benchmark.timed_signature``): at 1M elements
    (a ResNet-50 224 px block-1 layer at batch 5), a batch-32 step's ops cost what a batch-8 one's do.
    ``time_followers``: also time the ops that follow the allow ops low (element-wise ops, batch norm,
    pooling) and let the search keep islands of them float32 where that pays, casts counted
    (``estimate.follower_islands``). Off by default: on a 2-core AMX Xeon it kept every island of ResNet-50
    and MobileNet v1 low (their float32 kernels are faster alone, the casts around them cost more) and
    added 6.7 s to ResNet-50's cold pass (docs/BENCHMARKS.md).
    ``step_max_batch``: whole steps of a larger batch are timed fed this many examples, when the graph
    builds so (``region_copy.smaller_for_timing``): the check times each step three times or more, and
    a batch-32 ResNet-50 step takes 3 s in float32; at 4, ResNet-50 and MobileNet v1 at batch 8 rank
    their candidates as at 8, in 9 s of cold pass instead of 10.6 (docs/BENCHMARKS.md).
    """

    cache_dir: Optional[str] = None
    decisions_file: Optional[str] = None
    write_decisions: bool = True
    wait_seconds: float = 0.0
    poll_seconds: float = 0.5
    timings_file: Optional[str] = None
    measure: Optional[Measure] = None
    time_steps: bool = True
    measure_steps: Optional[MeasureSteps] = None
    target: MeasuringTarget = MeasuringTarget()
    warmup: int = 1
    runs: int = 7
    step_warmup: int = 1
    low_precision_margin: float = 0.20
    verify_window: float = 0.35
    max_timed_candidates: int = 4
    noise: NoiseRule = NoiseRule()
    step_timing_ms: float = 2500.0
    min_step_runs: int = 3
    max_step_runs: int = 21
    cast_sizes: Tuple[int, int] = (1 << 14, 1 << 20)
    op_max_elements: int = 1 << 20
    time_followers: bool = False
    step_max_batch: int = 4
    settle_step_runs: int = 7

    def fixed_timings_file(self) -> Optional[str]:
        """``timings_file``, else ``$SLIM_MP_TIMINGS_FILE``, else None (measure on this device)."""
        return self.timings_file or os.environ.get(TIMINGS_FILE_ENV) or None

    def fixed_timings(self) -> Optional[str]:
        """The fixed timings file the op timings come from, or None when they are measured.

        The one rule for it: an injected ``measure`` (a test's fake) wins over a fixed file, which
        wins over measuring. Fixed timings say nothing about this machine, so with them no whole
        step is timed either (``times_whole_steps``).
        """
        return None if self.measure is not None else self.fixed_timings_file()

    def times_whole_steps(self) -> bool:
        """Whether whole steps are timed: ``time_steps`` is on and the op timings are not fixed."""
        return self.time_steps and not self.fixed_timings()
