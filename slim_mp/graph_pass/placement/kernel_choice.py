"""Which kernel each gradient of a low op takes: the fastest measured, the casts it adds counted.

The micro-benchmarks time each gradient of a convolution or product alone (``GradientTiming``):
TensorFlow's kernel in float32 and in the low type, and a pointwise convolution's filter gradient
as a low matrix product, none with casts. So the casts each choice implies are added
(``gradient_kernels``): a ``FLOAT32`` gradient pays for the output gradient in float32 (once per
op), each other input it reads that is not a weight, and its result back to the low type unless
its input is a weight; a low weight gradient pays for its cast to the float32 weight. Every combination of kernels is
priced so (a few per op), and the cheapest is kept if it beats all-``LOW`` beyond the noise rule;
otherwise the op keeps TensorFlow's own low gradients. The choice's total replaces the op's low
time in the estimate, so an op whose gradients are slow low (a depthwise convolution on AMX) can
still run its fast forward pass low.
"""

import dataclasses
import itertools
from typing import Dict, List, Mapping, Sequence, Tuple

import numpy as np
import tensorflow as tf

from slim_mp.graph_pass.gradient_kernels import WEIGHT_ROLES, GradientKernel, gradient_roles, op_kernels
from slim_mp.graph_pass.placement.estimate import CastModel
from slim_mp.graph_pass.placement.noise import NoiseRule
from slim_mp.graph_pass.placement.signatures import GradientTiming, OpTiming


@dataclasses.dataclass(frozen=True)
class KernelChoice:
    """An op's gradient kernels (role -> kernel, ``LOW`` ones left out), its forward + backward low milliseconds
    with them (casts included), and the sentence saying why."""

    kernels: Mapping[str, GradientKernel]
    low_ms: float
    reason: str = ""


def _elements(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _cast_ms(casts: CastModel, shape: Sequence[int]) -> float:
    """One cast of a tensor of ``shape``: half of the modelled cast pair."""
    return casts.ms(_elements(shape)) / 2


def _combination_ms(combination: Sequence[GradientKernel], gradients: Sequence[GradientTiming],
                    input_shapes: Sequence[Sequence[int]], output_shape: Sequence[int], casts: CastModel) -> float:
    """The gradients' milliseconds with ``combination``'s kernels, the casts they add included."""
    total = 0.0
    float32_inputs = set()
    for index, (kernel, timing) in enumerate(zip(combination, gradients)):
        low_weight_cast = _cast_ms(casts, input_shapes[index]) if timing.role in WEIGHT_ROLES else 0.0
        if kernel == GradientKernel.MATMUL:
            total += timing.matmul_ms + low_weight_cast
        elif kernel == GradientKernel.LOW:
            total += timing.low_ms + low_weight_cast
        else:
            total += timing.float32_ms
            float32_inputs.update(other for other in range(len(gradients)) if other != index)
            if timing.role not in WEIGHT_ROLES:
                total += _cast_ms(casts, input_shapes[index])
    if GradientKernel.FLOAT32 in combination:
        total += _cast_ms(casts, output_shape)
    for index in float32_inputs:
        if gradients[index].role not in WEIGHT_ROLES:
            total += _cast_ms(casts, input_shapes[index])
    return total


def _options(op: tf.Operation, gradients: Sequence[GradientTiming]) -> List[Tuple[GradientKernel, ...]]:
    """Per gradient, the kernels it may take and has timings for."""
    return [tuple(kernel for kernel in op_kernels(op, timing.role)
                  if kernel != GradientKernel.MATMUL or timing.matmul_ms is not None) for timing in gradients]


def choose_kernels(op: tf.Operation, timing: OpTiming, casts: CastModel, rule: NoiseRule,
                   precision: str) -> KernelChoice:
    """The gradient kernels of the allow op ``op`` (as the static painting would make it low) from its timing."""
    gradients = timing.gradients
    if not gradients or len(gradients) != len(gradient_roles(op.type)):
        return KernelChoice({}, timing.low_ms)
    input_shapes = [tensor.shape.as_list() for tensor in op.inputs]
    output_shape = op.outputs[0].shape.as_list()
    priced: Dict[Tuple[GradientKernel, ...], float] = {
        combination: _combination_ms(combination, gradients, input_shapes, output_shape, casts)
        for combination in itertools.product(*_options(op, gradients))}
    all_low = priced[(GradientKernel.LOW,) * len(gradients)]
    best = min(priced, key=lambda combination: (priced[combination], combination.count(GradientKernel.LOW) * -1))
    if rule.is_noise(priced[best], all_low, timing.noise):
        return KernelChoice({}, timing.low_ms)
    kernels = {g.role: kernel for g, kernel in zip(gradients, best) if kernel != GradientKernel.LOW}
    parts = [f"{g.role} gradient {_kernel_label(kernel, precision)}" for g, kernel in zip(gradients, best)
             if kernel != GradientKernel.LOW]
    reason = (f"{', '.join(parts)}: gradients {priced[best]:.3f} ms vs {all_low:.3f} ms all in {precision}, casts "
              f"included (float32 kernels {sum(g.float32_ms for g in gradients):.3f} ms without casts)")
    return KernelChoice(kernels, timing.low_ms - all_low + priced[best], reason)


def _kernel_label(kernel: GradientKernel, precision: str) -> str:
    if kernel == GradientKernel.MATMUL:
        return f"as a {precision} matrix product"
    return "in float32"
