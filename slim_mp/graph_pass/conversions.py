"""The casts and folded constants a painting implies: planned before the graph is touched.

``refine`` compares plans to choose where the casts go, ``rebuild`` creates them, ``report``
lists them; all three share the ``Conversion`` record and its naming here.
"""

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from slim_mp.graph_pass.op_ports import OpPorts
from slim_mp.precision import short_name


@dataclasses.dataclass
class Conversion:
    """One Cast (or folded constant) the rewrite inserts, and its per-step traffic when known.

    ``kind`` is ``cast`` (on the path of some consumer), ``constant`` (a folded constant) or
    ``view`` (a float32 cast made only for a tensor the user holds or a graph collection lists:
    it costs nothing unless fetched).
    """

    name: str
    source: str
    source_dtype: str
    dtype: str
    kind: str
    bytes_per_step: Optional[int]


def bytes_per_step(tensor: tf.Tensor, dtype: tf.DType) -> Optional[int]:
    """Bytes a cast of ``tensor`` to ``dtype`` reads and writes per step (None for a dynamic shape)."""
    if not tensor.shape.is_fully_defined():
        return None
    return tensor.shape.num_elements() * (tensor.dtype.base_dtype.size + dtype.size)


def cast_name(tensor: tf.Tensor, dtype: tf.DType) -> str:
    """The name of the one Cast of ``tensor`` to ``dtype``, e.g. ``conv1/Conv2D/CastToBf16``."""
    port = f"/out{tensor.value_index}" if tensor.value_index else ""
    return f"{tensor.op.name}{port}/CastTo{short_name(dtype).capitalize()}"


def planned_conversions(low: Sequence[tf.Operation], ports: Dict[tf.Operation, OpPorts],
                        precision: tf.DType) -> List[Conversion]:
    """The casts and folded constants a rewrite of ``low`` would create, without touching the graph."""
    low_set = set(low)
    planned: Dict[Tuple[str, str], Conversion] = {}

    def need(tensor: tf.Tensor, dtype: tf.DType) -> None:
        key = (tensor.name, dtype.name)
        if key not in planned:
            folded = tensor.op.type == "Const"
            planned[key] = Conversion(
                name=cast_name(tensor, dtype), source=tensor.name, source_dtype=tensor.dtype.base_dtype.name,
                dtype=dtype.name, kind="constant" if folded else "cast",
                bytes_per_step=None if folded else bytes_per_step(tensor, dtype),
            )

    for op in low:
        for index, tensor in enumerate(op.inputs):
            producer_low = tensor.op in low_set and ports[tensor.op].data_outputs[tensor.value_index]
            wants_low = ports[op].data_inputs[index]
            if wants_low and not producer_low and tensor.dtype != precision:
                need(tensor, precision)
            elif producer_low and not wants_low:
                need(tensor, tf.float32)
        for tensor, is_data in zip(op.outputs, ports[op].data_outputs):
            if is_data and any(c not in low_set for c in tensor.consumers()):
                need(tensor, tf.float32)
    return list(planned.values())
