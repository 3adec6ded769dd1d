"""When nothing can be timed: why, and the plan that holds then.

An op is timed by its signature, which needs static shapes; a graph whose shapes are unknown (an
image size left to the caller, a training step of unknown batch) has none, and an op no kernel or
fixed timings file can time has no timing. The static lists would then decide alone. Where the
precision is native that is what they are for; where it is emulated (bfloat16 on a CPU without
AVX512-BF16/AMX, or with oneDNN off) they would make the step slower without a word, so every op
stays float32 (``plan.untimed_placement``) and the rewrite warns how to force the static painting.
"""

from typing import List, Optional, Sequence

import tensorflow as tf

from slim_mp.devices import DeviceInfo, PrecisionSupport, precision_support
from slim_mp.graph_pass.placement.estimate import step_words
from slim_mp.graph_pass.paint import LOW, PaintConfig, paint
from slim_mp.graph_pass.placement.plan import PlacementPlan, untimed_placement
from slim_mp.graph_pass.placement.target import MeasuringTarget
from slim_mp.graph_pass.region import Region


def static_low(region: Region, config: PaintConfig, classes: Sequence[str]) -> List[tf.Operation]:
    """The ops of ``classes`` the static painting makes low."""
    return [op for op, d in paint(region, config).items() if d.op_class in classes and d.colour == LOW]


def why_unsigned(region: Region, config: PaintConfig) -> str:
    """Why no op of ``region`` has a signature to time: the static lists make none low, or the first such op's
    input without a static shape (or, rarely, a non-float input that is not constant)."""
    low = static_low(region, config, ("allow",))
    if not low:
        return "the static lists make no op low"
    for op in low:
        for tensor in op.inputs:
            if not tensor.shape.is_fully_defined():
                return (f"no op the static lists make low has static shapes (e.g. {op.name}'s input {tensor.name} "
                        f"is {tensor.shape})")
    return f"no op the static lists make low has a timeable signature (e.g. {low[0].name})"


def support_where_run(config: PaintConfig, target: MeasuringTarget, device: DeviceInfo) -> Optional[PrecisionSupport]:
    """Whether the low precision is native where the step runs, ``device`` being this process's
    (``slim_mp.devices``); None when the step runs on another kind of device, whose support is not known here."""
    kind = target.device_type() or device.kind
    return precision_support(device)[config.precision.name] if kind == device.kind else None


def untimed_plan(region: Region, config: PaintConfig, target: MeasuringTarget, why: str,
                 device: DeviceInfo) -> PlacementPlan:
    """The plan when nothing could be timed (``why``): all float32 where the precision is emulated on the step's
    device, else the static painting (``plan.untimed_placement``)."""
    support = support_where_run(config, target, device)
    emulated = f"{config.precision.name} is {support.reason}" if support is not None and not support.native else ""
    low = [op.name for op in static_low(region, config, ("allow",))]
    return untimed_placement(why, low, emulated, step_words(target.training))
