"""Whole training steps of candidate placements timed side by side, and cached.

The steps come from the decision's ``StepPool`` (``candidate_step``), so a step built for one
batch is timed again in the next without being built again; they are timed in interleaved
rounds, each with the noise of its comparison with a reference step (``slim_mp.timing``), until every
comparison is settled (``NoiseRule.settled``) or the rounds run out.

Up to three batches are timed per decision (``StepBatch``): the close candidates of the search
(``COMPARE``), the chosen placement beside all float32 (``CHECK``, ``step_check``) and, only if
the chosen one lost, static beside all float32 (``STATIC``). They are cached apart: each result is
only comparable with the steps timed in the same rounds.
"""

import dataclasses
import enum
import hashlib
import warnings
from typing import List, Optional, Sequence

import tensorflow as tf

from slim_mp.graph_pass.gradient_kernels import GradientKernels
from slim_mp.graph_pass.placement.candidate import Candidate
from slim_mp.graph_pass.placement.candidate_step import StepPool
from slim_mp.graph_pass.placement.context import SearchContext
from slim_mp.graph_pass.placement.noise import NoiseRule
from slim_mp.timing import MIN_NOISE_ROUNDS, StillOpen, Timed, interleaved_ms, timed_against

# What building or running a candidate's step can raise; any of them means "decide on the estimate".
_STEP_ERRORS = (tf.errors.OpError, ValueError, TypeError, LookupError)


class StepBatch(enum.StrEnum):
    """Which batch of whole steps is timed; its value starts the batch's cache keys (``step|...``)."""

    COMPARE = "step"
    CHECK = "check"
    STATIC = "check-static"


def until_settled(noise: NoiseRule, reference: int, machine_noise: Optional[float] = None,
                  min_rounds: Optional[int] = None) -> StillOpen:
    """Rounds go on for all steps while any step's verdict against step ``reference`` is not settled
    (``NoiseRule.settled``), and for at least ``min_rounds`` rounds (default ``noise.settle_step_runs``:
    the check's verdict is the guarantee); a reference that did not run leaves them all to the last round.

    With ``machine_noise`` (the noise measured just before), every verdict clear in every round so
    far (``NoiseRule.is_clear``) also settles them, from the second round on.
    """

    def still_open(times: List[List[float]]) -> List[int]:
        everyone = list(range(len(times)))
        if not 0 <= reference < len(times) or not times[reference]:
            return everyone
        others = [values for index, values in enumerate(times) if values and index != reference]
        if machine_noise is not None and all(
                noise.is_clear(values, times[reference], machine_noise)
                for values in others):
            return []
        if len(times[reference]) < (noise.settle_step_runs if min_rounds is None else min_rounds):
            return everyone
        settled = all(noise.settled(values, times[reference]) for values in others)
        return [] if settled else everyone

    return still_open


@dataclasses.dataclass(frozen=True)
class StepRounds:
    """How one batch of whole steps is timed: up to ``runs`` rounds, each step judged against step
    ``reference``; ``machine_noise`` and ``min_rounds`` as ``until_settled`` takes them."""

    runs: int
    reference: int = 0
    machine_noise: Optional[float] = None
    min_rounds: Optional[int] = None


def time_candidate_steps(pool: StepPool, candidates: Sequence[Candidate], noise: NoiseRule,
                         rounds: StepRounds, kernels: GradientKernels = GradientKernels()) -> List[Optional[Timed]]:
    """One step of each candidate (from ``pool``, warmed up there; its low ops' gradients by ``kernels``) timed
    in up to ``rounds.runs`` interleaved
    rounds, fewer once every step's verdict against candidate ``rounds.reference`` is settled: its fastest
    milliseconds and the noise of comparing it with that candidate; None for one that fails to run.

    With ``rounds.machine_noise`` a clear verdict may end the rounds from the second (``until_settled``);
    a step timed in fewer rounds than a spread needs (``MIN_NOISE_ROUNDS``) then carries that noise.
    """
    reference, machine_noise = rounds.reference, rounds.machine_noise
    pool.start(candidates, kernels)
    steps = [pool.step(candidate, kernels) for candidate in candidates]
    pool.wait_idle()
    times = interleaved_ms([step.run for step in steps], rounds.runs,
                           still_open=until_settled(noise, reference, machine_noise, rounds.min_rounds),
                           first_look=MIN_NOISE_ROUNDS if machine_noise is None else 2)
    return [Timed(timed.ms, machine_noise) if timed is not None and machine_noise is not None and index != reference
            and len(times[index]) < MIN_NOISE_ROUNDS else timed
            for index, timed in enumerate(timed_against(times, reference))]


def step_runs(context: SearchContext, candidates: Sequence[Candidate]) -> int:
    """Timed rounds that fit ``step_timing_ms`` for all candidates, within the tuning's bounds."""
    tuning = context.options.tuning
    longest_ms = max(context.estimate(c) for c in candidates)
    fitting = tuning.step_timing_ms / (longest_ms * len(candidates) or 1.0)
    return int(min(tuning.max_step_runs, max(tuning.min_step_runs, fitting)))


def _painting_digest(context: SearchContext, candidate: Candidate) -> str:
    """What distinguishes ``candidate``'s step from another of the same copy: its low ops and their gradient
    kernels."""
    low = sorted(context.estimate.painted(candidate)[1])
    graph = context.estimate.region.graph
    painting = low + [f"{name}:{index}:{kernel}" for name in low
                      for index, kernel in sorted(context.kernels.by_input(graph.get_operation_by_name(name)).items())]
    return hashlib.sha1("|".join(painting).encode()).hexdigest()[:20]


def steps_timed(context: SearchContext, candidates: Sequence[Candidate], reference: int,
                batch: StepBatch) -> Optional[List[Optional[Timed]]]:
    """Each candidate's whole step and its noise against candidate ``reference``; None (with a warning)
    when timing failed or no region copy exists.

    From the cache when all are there; if one is missing, all are timed again in the same rounds,
    so that they are compared under the same load. A candidate whose step does not run is None.
    """
    copy, options = context.copy, context.options
    if copy is None or context.steps is None:
        return None
    digest = copy.digest()
    keys = [f"{batch.value}|{digest}|" + _painting_digest(context, c) for c in candidates]
    stored = [context.cache.get(key) for key in keys]
    if all(value and len(value) == 2 for value in stored):
        return [Timed(*value) for value in stored]
    runs = step_runs(context, candidates)
    # The search's batch only ranks the candidates (the check, timed apart, is the guarantee): its rounds may
    # settle as soon as a spread can be read.
    comparing = batch == StepBatch.COMPARE
    machine_noise = None if comparing else context.machine_noise
    measure = options.measuring.measure_steps or (lambda timed, base: time_candidate_steps(
        context.steps, timed, options.tuning.noise,
        StepRounds(runs, base, machine_noise, MIN_NOISE_ROUNDS if comparing else None), context.kernels))
    try:
        times = measure(candidates, reference)
    except _STEP_ERRORS as error:
        warnings.warn(f"placement: timing whole steps failed ({type(error).__name__}: {error}); deciding on "
                      "the per-op estimate.", stacklevel=3)
        return None
    if not any(times):
        warnings.warn("placement: no candidate's whole step ran; deciding on the per-op estimate.", stacklevel=3)
    context.cache.add({key: [timed.ms, timed.noise] for key, timed in zip(keys, times) if timed})
    return list(times)
