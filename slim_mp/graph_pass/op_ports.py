"""Which inputs and outputs of an op carry its float data type, and which attrs set it.

The painter converts an op by switching its float32 *data* type attrs (usually ``T``) to the low
precision. Other float32 attrs stay: batch norm's ``U`` (scale, offset, statistics) is kept float32
on purpose. An input or output port whose dtype is set by a converted attr changes dtype with the op;
all other ports keep theirs. ``FusedBatchNorm`` (V1) has one ``T`` for everything and no half/bfloat16
kernel, so it is treated as the ``FusedBatchNormV3`` it will be upgraded to.
"""

import dataclasses
import functools
from typing import Dict, FrozenSet, List, Optional, Tuple

import tensorflow as tf
from tensorflow.python.framework import kernels, op_def_registry

from slim_mp.graph_pass.op_classes import KEEP_FLOAT32_ATTRS, UPGRADED_OP_TYPES


@dataclasses.dataclass(frozen=True)
class OpPorts:
    """The data attrs of one op and, per flat input/output index, whether that port carries them."""

    op_type: str
    data_attrs: FrozenSet[str]
    data_inputs: Tuple[bool, ...]
    data_outputs: Tuple[bool, ...]

    @property
    def has_float_data(self) -> bool:
        return bool(self.data_attrs)


def target_op_type(op_type: str) -> str:
    """The op type the rebuilt op gets (the type itself unless it is upgraded)."""
    return UPGRADED_OP_TYPES.get(op_type, op_type)


def _attr_value(op: tf.Operation, name: str):
    try:
        return op.get_attr(name)
    except ValueError:
        # FusedBatchNorm V1 has no "U"; its T plays that role before the upgrade.
        return op.get_attr("T")


def _port_attrs(args, op: tf.Operation) -> List[Tuple[Optional[str], Optional[int]]]:
    """Expand op-def args into one ``(type attr, list index)`` per flat port."""
    ports: List[Tuple[Optional[str], Optional[int]]] = []
    for arg in args:
        if arg.number_attr:
            ports.extend([(arg.type_attr or None, None)] * op.get_attr(arg.number_attr))
        elif arg.type_list_attr:
            count = len(op.get_attr(arg.type_list_attr))
            ports.extend((arg.type_list_attr, index) for index in range(count))
        else:
            ports.append((arg.type_attr or None, None))
    return ports


def _is_float32(op: tf.Operation, attr: Optional[str], index: Optional[int]) -> bool:
    if attr is None:
        return False
    value = _attr_value(op, attr)
    if index is not None:
        value = value[index]
    return tf.dtypes.as_dtype(value) == tf.float32


def op_ports(op: tf.Operation) -> OpPorts:
    """Describe ``op``'s float32 data attrs and the ports they type."""
    op_type = target_op_type(op.type)
    op_def = op_def_registry.get(op_type)
    if op_def is None:  # a call of a graph function: its body is not ours to convert
        return OpPorts(op.type, frozenset(), tuple(False for _ in op.inputs), tuple(False for _ in op.outputs))
    keep = KEEP_FLOAT32_ATTRS.get(op_type, frozenset())
    attrs = set()
    for attr in op_def.attr:
        if attr.name in keep or attr.type not in ("type", "list(type)"):
            continue
        value = _attr_value(op, attr.name)
        values = value if isinstance(value, list) else [value]
        if any(tf.dtypes.as_dtype(v) == tf.float32 for v in values):
            attrs.add(attr.name)
    inputs = tuple(
        attr in attrs and _is_float32(op, attr, index) for attr, index in _port_attrs(op_def.input_arg, op)
    )
    outputs = tuple(
        attr in attrs and _is_float32(op, attr, index) for attr, index in _port_attrs(op_def.output_arg, op)
    )
    return OpPorts(op.type, frozenset(attrs), inputs, outputs)


def op_def_allows(op_type: str, attrs: FrozenSet[str], dtype: tf.DType) -> bool:
    """True if the op definition lets every attr in ``attrs`` take ``dtype``."""
    op_def = op_def_registry.get(target_op_type(op_type))
    for attr in op_def.attr:
        if attr.name in attrs and attr.allowed_values.list.type:
            if dtype.as_datatype_enum not in attr.allowed_values.list.type:
                return False
    return True


@functools.lru_cache(maxsize=None)
def _kernel_constraints(op_type: str, device_type: str) -> Tuple[Dict[str, FrozenSet[int]], ...]:
    registered = kernels.get_registered_kernels_for_op(op_type)
    return tuple(
        {c.name: frozenset(c.allowed_values.list.type) for c in kernel.constraint}
        for kernel in registered.kernel
        if kernel.device_type == device_type
    )


def has_kernel(op_type: str, attrs: FrozenSet[str], dtype: tf.DType, device_type: str) -> bool:
    """True if some ``device_type`` kernel of the op accepts ``dtype`` for every attr in ``attrs``."""
    wanted = dtype.as_datatype_enum
    for constraints in _kernel_constraints(target_op_type(op_type), device_type):
        if all(wanted in constraints[a] for a in attrs if a in constraints):
            return True
    return False
