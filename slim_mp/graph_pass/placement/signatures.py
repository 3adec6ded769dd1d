"""What an op's speed depends on (its signature), and the timing measured for one."""

import dataclasses
import json
from typing import List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from slim_mp.graph_pass.op_ports import op_ports

CAST = "Cast"


@dataclasses.dataclass(frozen=True)
class OpSignature:
    """What an op's speed depends on: its type, data-input shapes, constant inputs and attributes, and the
    shapes of the float32 inputs that stay float32 when it goes low (``side_inputs``, by input index: batch
    norm's scale, offset and statistics)."""

    op_type: str
    input_shapes: Tuple[Tuple[int, ...], ...]
    constant_inputs: Tuple[Tuple[int, Tuple[int, ...]], ...] = ()
    attrs: Tuple[Tuple[str, object], ...] = ()
    side_inputs: Tuple[Tuple[int, Tuple[int, ...]], ...] = ()

    def key(self) -> str:
        """A stable text key for the cache."""
        fields = [self.op_type, self.input_shapes, self.constant_inputs, self.attrs]
        return json.dumps(fields + ([self.side_inputs] if self.side_inputs else []), default=str)


@dataclasses.dataclass(frozen=True)
class GradientTiming:
    """One gradient of an op (by input, ``role``) timed alone: TensorFlow's kernel in float32 and in the low
    type, and, for a pointwise convolution's filter, the low matrix product (``GradientKernel.MATMUL``;
    None where it does not apply). Milliseconds, without the casts a choice would add."""

    role: str
    float32_ms: float
    low_ms: float
    matmul_ms: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class OpTiming:
    """Milliseconds of one forward + backward of a signature in float32 and in the low type.

    ``noise``: the noise of the comparison (``slim_mp.timing.relative_noise`` of the low rounds against the
    float32 ones), 0 when unknown. ``gradients``: for op types whose gradients may each take their own
    kernel (``gradient_kernels.GRADIENT_ROLES``), each gradient timed alone, in input order; ``low_ms``
    then counts every gradient in the low type (TensorFlow's own), ``placement.kernel_choice`` the best.
    """

    float32_ms: float
    low_ms: float
    noise: float = 0.0
    gradients: Tuple[GradientTiming, ...] = ()

    def charged_low_ms(self, margin: float) -> float:
        """The low time charged ``margin`` more: the one margin rule of the estimate, its candidates and
        their reasons (what goes low around the allow ops, batch norm, activations, casts' layouts, is
        not timed, so a low time alone flatters the low type)."""
        return self.low_ms * (1 + margin)

    def slower_low(self, margin: float) -> bool:
        """Whether the low type, charged ``margin`` more, is no faster than float32."""
        return self.charged_low_ms(margin) >= self.float32_ms

    def as_numbers(self) -> List[Optional[float]]:
        """The cache's list: ``[float32_ms, low_ms, noise]``, then per gradient ``float32, low, matmul`` ms."""
        numbers: List[Optional[float]] = [self.float32_ms, self.low_ms, self.noise]
        for gradient in self.gradients:
            numbers.extend([gradient.float32_ms, gradient.low_ms, gradient.matmul_ms])
        return numbers


def op_timing_from(numbers: Sequence[Optional[float]], roles: Sequence[str]) -> Optional[OpTiming]:
    """The ``OpTiming`` of a cache list (``OpTiming.as_numbers``) of an op whose gradients have ``roles``;
    None when the list is not one (a whole step's, or one of another shape)."""
    if len(numbers) == 3 and all(isinstance(value, (int, float)) for value in numbers):
        return OpTiming(*numbers)
    if len(numbers) != 3 + 3 * len(roles) or not roles or any(value is None for value in numbers[:3]):
        return None
    pieces = [numbers[3 + 3 * index:6 + 3 * index] for index in range(len(roles))]
    if any(piece[0] is None or piece[1] is None for piece in pieces):
        return None
    return OpTiming(*numbers[:3], tuple(GradientTiming(role, *piece) for role, piece in zip(roles, pieces)))


def _attr_value(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, (list, tuple)):
        return tuple(_attr_value(item) for item in value)
    return value


def op_signature(op: tf.Operation) -> Optional[OpSignature]:
    """The signature of ``op``, or None when an input's shape is not static or a non-data input that is not
    float32 is not constant."""
    ports = op_ports(op)
    shapes, constants, side = [], [], []
    for index, (tensor, is_data) in enumerate(zip(op.inputs, ports.data_inputs)):
        if is_data or tensor.dtype == tf.float32:
            if not tensor.shape.is_fully_defined():
                return None
            (shapes if is_data else side).append(tuple(tensor.shape.as_list()) if is_data
                                                 else (index, tuple(tensor.shape.as_list())))
            continue
        value = tf.get_static_value(tensor)
        if value is None:
            return None
        constants.append((index, tuple(np.asarray(value).ravel().tolist())))
    attrs = []
    for attr in op.op_def.attr:
        if attr.type in ("type", "list(type)"):
            continue
        attrs.append((attr.name, _attr_value(op.get_attr(attr.name))))
    return OpSignature(op.type, tuple(shapes), tuple(constants), tuple(sorted(attrs)), tuple(side))


def cast_signature(elements: int) -> OpSignature:
    """The pseudo-signature of a cast pair (to low and back) of ``elements`` values."""
    return OpSignature(CAST, ((elements,),))
