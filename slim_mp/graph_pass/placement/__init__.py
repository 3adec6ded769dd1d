"""Measured placement: keep float32 where low precision does not pay on the device the pass targets.

The static tables say "conv and matmul always run low". On a CPU that is true for large inputs
(oneDNN's bfloat16 convolutions are ~1.7x faster at 224 px) and false for small ones (at 32 px
they are slower than float32). So, before painting, the pass times each *allow* op that the
static painting would make low, with its real shapes and attributes, on this device, and
compares candidate placements by an estimate and, where they are close, by timed whole steps.

The modules in the order data flows through them (``measured``'s docstring has the decision as
numbered steps; each module imports only those above it):

- ``signatures``: what an op's speed depends on (``OpSignature``) and its timing (``OpTiming``, with
  the one margin rule ``charged_low_ms``);
- ``target``: where the step will run (``MeasuringTarget``: device, session options, training);
- ``noise``: when a timed difference counts (``NoiseRule``, its verdicts: beyond the floor and the measured noise);
- ``timing_graphs``: the graphs timed: random variables standing in for inputs, a fetch that forces the work;
- ``micro_benchmark``: one op signature timed alone, in float32 and low (convolutions and products by parts:
  forward and each gradient);
- ``candidate``: one placement compared (``Candidate``, with its reasons), the static and all-float32
  references, and ``apply_placement``;
- ``options``: ``PlacementOptions`` (its three records: files, measuring, tuning; the fixed-timings rule) and
  the placement names (``Placement``);
- ``timing_cache``: the disk cache, fixed timings files, measuring what is missing;
- ``estimate``: a step's estimate from op and cast timings, and the connected low regions;
- ``kernel_choice``: each low op's gradient kernels, the fastest measured with their casts counted;
- ``region_copy``: a standalone copy of the region, for timing whole steps;
- ``candidate_step``: one candidate's whole training step built on the copy, and the pool that keeps
  built steps open for the decision (``StepPool``);
- ``context``: one decision's inputs as one frozen value (``SearchContext``);
- ``whole_steps``: candidates' whole steps timed side by side until settled, cached;
- ``search``: which candidates to compare, why each keeps its ops float32, and which wins;
- ``step_check``: the chosen placement against all float32 and the static one, as whole steps;
- ``plan`` / ``decisions``: the decision (``PlacementPlan``; ``untimed_placement`` when nothing could be
  timed) and the decisions file that pins it;
- ``untimed``: the plan when nothing can be timed;
- ``served_batches``: an inference graph whose batch is unknown, decided at each serving batch size and the
  plans joined;
- ``measured``: the whole procedure (``measured_placement``).

A precision the device only emulates (float16 on a CPU) is not timed: ``emulated_placement``
keeps the static painting, so its numerics can be checked anywhere. Where nothing can be timed (a
shape not static) the static painting applies where the precision is native; where it is emulated
(bfloat16 on a CPU without AVX512-BF16, or with oneDNN off) every op stays float32, as timing would
almost surely have kept it, and the rewrite's warning names the static placement that forces it low.
"""

from slim_mp.graph_pass.placement.candidate import Candidate, apply_placement
from slim_mp.graph_pass.placement.decisions import DECISIONS_FILE_NAME
from slim_mp.graph_pass.placement.measured import measured_placement
from slim_mp.graph_pass.placement.options import (CACHE_ENV, PLACEMENT_ENV, PLACEMENTS, TIMINGS_FILE_ENV, Placement,
                                                  PlacementFiles, PlacementMeasuring, PlacementOptions,
                                                  PlacementTuning, default_placement, resolve_placement)
from slim_mp.graph_pass.placement.plan import PlacementPlan, emulated_placement
from slim_mp.graph_pass.placement.step_check import StepCheck
from slim_mp.graph_pass.placement.noise import NoiseRule
from slim_mp.graph_pass.placement.target import MeasuringTarget
from slim_mp.graph_pass.placement.signatures import OpSignature, OpTiming
from slim_mp.graph_pass.placement.timing_cache import cache_dir as timing_cache_dir

__all__ = [
    "Candidate", "apply_placement", "DECISIONS_FILE_NAME", "measured_placement", "CACHE_ENV", "PLACEMENT_ENV",
    "PLACEMENTS", "TIMINGS_FILE_ENV", "Placement", "PlacementFiles", "PlacementMeasuring", "PlacementOptions",
    "PlacementTuning", "default_placement", "resolve_placement",
    "PlacementPlan", "emulated_placement", "StepCheck", "NoiseRule", "MeasuringTarget", "OpSignature", "OpTiming",
    "timing_cache_dir",
]
