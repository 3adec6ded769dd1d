"""Measured placement: keep float32 where low precision does not pay on the device the pass targets.

The static tables say "conv and matmul always run low". On a CPU that is true for large inputs
(oneDNN's bfloat16 convolutions are ~1.7x faster at 224 px) and false for small ones (at 32 px
they are slower than float32). So, before painting, the pass times each *allow* op that the
static painting would make low, with its real shapes and attributes, on this device, and
compares candidate placements by an estimate and, where they are close, by timed whole steps.

One module per concern, lowest first:

- ``signatures``: what an op's speed depends on (``OpSignature``) and its timing (``OpTiming``);
- ``stopwatch`` / ``micro_benchmark``: interleaved rounds and their noise estimate, and one op timed alone;
- ``target``: where the step will run (``MeasuringTarget``: device, session options, training);
- ``options``: ``PlacementOptions`` (every tuning value) and the placement names;
- ``timing_cache``: the disk cache, fixed timings files, measuring what is missing;
- ``candidate``: one placement compared (``Candidate``, with its reasons) and ``apply_placement``;
- ``estimate``: a step's estimate from op and cast timings;
- ``whole_steps`` / ``timed_steps``: standalone copies of the region, timed as whole training steps (cached);
- ``search``: which candidates to compare and which wins (the noise rule: ``PlacementOptions.is_noise``);
- ``step_check``: the chosen placement against all float32 and the static one, as whole steps;
- ``plan`` / ``decisions``: the decision (``PlacementPlan``) and the decisions file;
- ``measured``: the whole procedure (``measured_placement``).

A precision the device only emulates (float16 on a CPU) is not timed: ``emulated_placement``
keeps the static painting, so its numerics can be checked anywhere.
"""

from slim_mp.graph_pass.placement.candidate import Candidate, apply_placement
from slim_mp.graph_pass.placement.decisions import DECISIONS_FILE_NAME
from slim_mp.graph_pass.placement.measured import measured_placement
from slim_mp.graph_pass.placement.options import (CACHE_ENV, PLACEMENT_ENV, PLACEMENTS, TIMINGS_FILE_ENV,
                                                  PlacementOptions, default_placement, resolve_placement)
from slim_mp.graph_pass.placement.plan import PlacementPlan, emulated_placement
from slim_mp.graph_pass.placement.step_check import StepCheck
from slim_mp.graph_pass.placement.stopwatch import Timed
from slim_mp.graph_pass.placement.target import MeasuringTarget
from slim_mp.graph_pass.placement.signatures import OpSignature, OpTiming

__all__ = [
    "Candidate", "apply_placement", "DECISIONS_FILE_NAME", "measured_placement", "CACHE_ENV", "PLACEMENT_ENV",
    "PLACEMENTS", "TIMINGS_FILE_ENV", "PlacementOptions", "default_placement", "resolve_placement",
    "PlacementPlan", "emulated_placement", "StepCheck", "Timed", "MeasuringTarget", "OpSignature", "OpTiming",
]
