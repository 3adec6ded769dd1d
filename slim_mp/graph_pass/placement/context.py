"""What one placement decision works with, as one frozen value (``SearchContext``).

Built once by ``measured`` after the op timings are in, and handed to every step that times or
judges candidates (``whole_steps``, ``step_check``), so they all see the same painting, options,
cache, estimate, region copy and built steps.
"""

import dataclasses
from typing import FrozenSet, Optional

from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement.candidate import Candidate, lowered_ops
from slim_mp.graph_pass.placement.candidate_step import StepPool
from slim_mp.graph_pass.placement.estimate import Estimator
from slim_mp.graph_pass.placement.options import PlacementOptions
from slim_mp.graph_pass.placement.region_copy import RegionCopy
from slim_mp.graph_pass.placement.timing_cache import TimingCache


@dataclasses.dataclass(frozen=True)
class SearchContext:
    """One decision's inputs.

    ``config``: the painting the placement refines; ``options``: its tuning; ``cache``: where op and step
    timings are stored; ``estimate``: the per-op estimate (with ``low_precision_margin``), its ``timings`` the
    timed ops (the allow ops and those that follow them low); ``copy``: the region's standalone copy for whole
    steps, None when none is timed, ``why_not_copied`` then saying why (empty when steps are simply not asked
    for); ``all_float32``: the all-float32 candidate as the search found it (with its labels); ``steps``: the
    copy's built steps (``StepPool``), None without a copy. ``machine_noise``: the noise of the op pairs
    micro-benchmarked for this decision (``noise.pooled_noise``), None when none was timed now (cached timings
    say nothing of this machine's noise at this moment).
    """

    config: PaintConfig
    options: PlacementOptions
    cache: TimingCache
    estimate: Estimator
    copy: Optional[RegionCopy]
    why_not_copied: str
    all_float32: Candidate
    steps: Optional[StepPool] = None
    machine_noise: Optional[float] = None

    @property
    def precision(self) -> str:
        """The low type's name (``bfloat16``), as the reasons and verdicts say it."""
        return self.config.precision.name

    def lowered(self, candidate: Candidate) -> FrozenSet[str]:
        """The timed ops ``candidate`` runs low (``candidate.lowered_ops``)."""
        return lowered_ops(candidate, self.estimate.timings)
