"""Whole steps of candidate placements with their noise: from the timing cache, or timed side by side now.

Used twice by the measured placement (``measured``): to compare the close candidates of the
search (``kind="step"``) and to check the chosen placement against all float32 and the static
placement (``kind="check"``, ``step_check``). The two batches are cached apart: each result is only
comparable with the steps timed in the same rounds.
"""

import hashlib
import warnings
from typing import List, Optional, Sequence, Tuple

import tensorflow as tf

from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement.candidate import Candidate
from slim_mp.graph_pass.placement.estimate import Estimator
from slim_mp.graph_pass.placement.options import PlacementOptions
from slim_mp.graph_pass.placement.stopwatch import Timed
from slim_mp.graph_pass.placement.timing_cache import TimingCache
from slim_mp.graph_pass.placement.whole_steps import RegionCopy, copy_region, time_candidate_steps
from slim_mp.graph_pass.region import Region

_STEP_ERRORS = (tf.errors.OpError, ValueError, TypeError, LookupError)


def region_copy(region: Region, objectives: Sequence[tf.Tensor]) -> Tuple[Optional[RegionCopy], str]:
    """(the standalone copy of ``region``, "") or (None, why it cannot be copied), with a warning."""
    try:
        return copy_region(region, objectives), ""
    except ValueError as error:
        warnings.warn(f"placement: cannot time whole steps ({error}); deciding on the per-op estimate.",
                      stacklevel=3)
        return None, f"the region cannot be copied ({error})"


def step_runs(candidates: Sequence[Candidate], estimate: Estimator, options: PlacementOptions) -> int:
    """Timed rounds that fit ``options.step_timing_ms`` for all candidates, within the option's bounds."""
    longest_ms = max(estimate(c) for c in candidates)
    fitting = options.step_timing_ms / (longest_ms * len(candidates) or 1.0)
    return int(min(options.max_step_runs, max(options.min_step_runs, fitting)))


def steps_timed(copy: RegionCopy, config: PaintConfig, candidates: Sequence[Candidate], reference: int,
                estimate: Estimator, cache: TimingCache, options: PlacementOptions,
                kind: str) -> Optional[List[Optional[Timed]]]:
    """Each candidate's whole step and its noise against candidate ``reference``; None (with a warning)
    when timing failed.

    If one is missing from the cache, all are timed again in the same rounds, so that they are
    compared under the same load. A candidate whose step does not run is None.
    """
    digest = copy.digest()
    keys = [f"{kind}|{digest}|" + hashlib.sha1("|".join(sorted(estimate.painted(c)[1])).encode()).hexdigest()[:20]
            for c in candidates]
    stored = [cache.get(key) for key in keys]
    if all(value and len(value) == 2 for value in stored):
        return [Timed(*value) for value in stored]
    runs = step_runs(candidates, estimate, options)
    measure = options.measure_steps or (lambda batch, base: time_candidate_steps(
        copy, config, batch, options.target, warmup=1, runs=runs, reference=base))
    try:
        times = measure(candidates, reference)
    except _STEP_ERRORS as error:
        warnings.warn(f"placement: timing whole steps failed ({type(error).__name__}: {error}); deciding on "
                      "the per-op estimate.", stacklevel=3)
        return None
    if not any(times):
        warnings.warn("placement: no candidate's whole step ran; deciding on the per-op estimate.", stacklevel=3)
    cache.add({key: [timed.ms, timed.noise] for key, timed in zip(keys, times) if timed})
    return list(times)
