"""What one placement decision works with, as one frozen value (``SearchContext``).

Built once by ``measured`` after the op timings and the gradient kernels are in, and handed to every
step that times or judges candidates (``whole_steps``, ``search``, ``step_check``), so they all see the
same painting, options, cache, estimate, kernels, all-float32 reference, region copy and built steps.
"""

import dataclasses
from typing import FrozenSet, Optional

from slim_mp.graph_pass.gradient_kernels import GradientKernels
from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement.candidate import Candidate, all_float32_candidate, lowered_ops
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
    for); ``kernels``: the gradient kernels chosen for the low ops (``kernel_choice``), which every step is
    built with; ``steps``: the copy's built steps (``StepPool``), None without a copy. ``machine_noise``: the
    noise of the op pairs micro-benchmarked for this decision (``noise.pooled_noise``), None when none was
    timed now (cached timings say nothing of this machine's noise at this moment). ``all_float32``: the
    reference, every timed op kept float32.
    """

    config: PaintConfig
    options: PlacementOptions
    cache: TimingCache
    estimate: Estimator
    copy: Optional[RegionCopy]
    why_not_copied: str
    kernels: GradientKernels = GradientKernels()
    steps: Optional[StepPool] = None
    machine_noise: Optional[float] = None

    @property
    def precision(self) -> str:
        """The low type's name (``bfloat16``), as the reasons and verdicts say it."""
        return self.config.precision.name

    @property
    def all_float32(self) -> Candidate:
        """The reference every placement is measured against: every timed op kept float32."""
        return all_float32_candidate(self.estimate.timings)

    def lowered(self, candidate: Candidate) -> FrozenSet[str]:
        """The timed ops ``candidate`` runs low (``candidate.lowered_ops``)."""
        return lowered_ops(candidate, self.estimate.timings)
