"""Apply a painting to the graph: new low-precision ops, shared casts, consumers re-routed in place.

TensorFlow cannot change the dtype of an existing op's outputs, so each op painted low is rebuilt
as a new op named ``<old name>_bf16`` (or ``_fp16``) with the same attributes except its data type,
and every consumer of the old op is re-routed (``Operation._update_input``) to the new op, through
a cast back to float32 where it needs one. The old ops stay in the graph, unused: nothing that
computes the fetches reaches them any more.

Casts are shared: one per (tensor, target dtype), whoever consumes it. Float32 constants feeding
low-precision ops are folded into low-precision constants instead of being cast at run time. A
rebuilt op that reads a cast weight has that cast deferred until the op's other inputs exist, and
gets a gradient function that casts the weight again instead of holding the forward cast
(``weight_casts``), and each gradient of it the kernel the placement chose (``gradient_kernels``).
"""

import contextlib
from typing import Any, Dict, List, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.framework import op_def_registry, tensor_util
from tensorflow.python.framework import ops as framework_ops

from slim_mp.graph_pass.gradient_kernels import GradientKernels, gradient_with_kernels
from slim_mp.graph_pass.weight_casts import defer_weight_casts, recast_weights_in_gradient
from slim_mp.graph_pass.wire_side import keep_gradient_beside, remote_variable_device
from slim_mp.graph_pass.conversions import Conversion, bytes_per_step, cast_name
from slim_mp.graph_pass.op_ports import OpPorts, target_op_type
from slim_mp.precision import short_name


def _with_dtype(value: attr_value_pb2.AttrValue, dtype: tf.DType) -> attr_value_pb2.AttrValue:
    """A copy of a type or list(type) attr value with float32 replaced by ``dtype``."""
    new_value = attr_value_pb2.AttrValue()
    new_value.CopyFrom(value)
    if value.WhichOneof("value") == "type":
        new_value.type = dtype.as_datatype_enum
    else:
        types = [dtype.as_datatype_enum if t == tf.float32.as_datatype_enum else t for t in value.list.type]
        del new_value.list.type[:]
        new_value.list.type.extend(types)
    return new_value


class Rebuilder:
    """Creates the low-precision ops and casts of one rewrite and remembers what replaced what."""

    def __init__(self, graph: tf.Graph, precision: tf.DType, gradient_kernels: GradientKernels = GradientKernels()):
        self.graph = graph
        self.precision = precision
        self.gradient_kernels = gradient_kernels
        self.replaced: Dict[tf.Operation, tf.Operation] = {}
        self._converted: Dict[Tuple[str, tf.DType], tf.Tensor] = {}
        self.conversions: List[Conversion] = []
        self.warnings: List[str] = []
        self._cast_kind = "cast"

    @contextlib.contextmanager
    def _clean_scope(self, device: str):
        """Create ops at the top level: no user name scope, control dependencies or colocation."""
        with self.graph.as_default(), self.graph.name_scope(None), self.graph.control_dependencies(None):
            with self.graph.colocate_with(None, ignore_existing=True), self.graph.device(device):
                yield

    def current(self, tensor: tf.Tensor) -> tf.Tensor:
        """The tensor that now computes ``tensor`` (itself unless its op was rebuilt)."""
        new_op = self.replaced.get(tensor.op)
        return tensor if new_op is None else new_op.outputs[tensor.value_index]

    def version(self, tensor: tf.Tensor, dtype: tf.DType, reader_device: str = "") -> tf.Tensor:
        """``tensor``'s current value in ``dtype``: itself, a shared Cast, or a folded constant.

        A cast of a variable on another task than ``reader_device`` (the op that reads the cast) is made on the
        variable's device, and its gradient there too (``wire_side``).
        """
        current = self.current(tensor)
        if current.dtype.base_dtype == dtype.base_dtype:
            return current
        key = (current.name, dtype)
        if key not in self._converted:
            folded = current.op.type == "Const"
            make = self._fold_constant if folded else self._cast
            remote = "" if folded else remote_variable_device(current, reader_device)
            with self._clean_scope(remote or current.op.device):
                self._converted[key] = make(current, dtype)
            if remote:
                keep_gradient_beside(self._converted[key].op, remote)
            self.conversions.append(Conversion(
                name=self._converted[key].op.name, source=current.name,
                source_dtype=current.dtype.base_dtype.name, dtype=dtype.name,
                kind="constant" if folded else self._cast_kind,
                bytes_per_step=None if folded else bytes_per_step(current, dtype),
            ))
        return self._converted[key]

    def _cast(self, tensor: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        attrs = {
            "SrcT": attr_value_pb2.AttrValue(type=tensor.dtype.base_dtype.as_datatype_enum),
            "DstT": attr_value_pb2.AttrValue(type=dtype.as_datatype_enum),
            "Truncate": attr_value_pb2.AttrValue(b=False),
        }
        cast = self.graph._create_op_internal("Cast", [tensor], name=cast_name(tensor, dtype), attrs=attrs)
        return cast.outputs[0]

    def _fold_constant(self, tensor: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        value = tensor_util.MakeNdarray(tensor.op.get_attr("value"))
        with np.errstate(over="ignore"):
            converted = value.astype(dtype.as_numpy_dtype)
        if np.isfinite(value).all() and not np.isfinite(converted.astype(np.float32)).all():
            self.warnings.append(
                f"constant {tensor.op.name} overflows {dtype.name} (largest |value| "
                f"{np.abs(value).max():.3g}); keep its consumers float32 with keep_fp32_scopes or use bfloat16."
            )
        attrs = {
            "value": attr_value_pb2.AttrValue(tensor=tensor_util.make_tensor_proto(converted, dtype=dtype)),
            "dtype": attr_value_pb2.AttrValue(type=dtype.as_datatype_enum),
        }
        name = f"{tensor.op.name}_{short_name(dtype)}"
        return self.graph._create_op_internal("Const", [], name=name, attrs=attrs).outputs[0]

    def rebuild(self, op: tf.Operation, ports: OpPorts) -> tf.Operation:
        """Create the low-precision twin of ``op``; its consumers are re-routed later by ``reroute``."""
        op_type = target_op_type(op.type)
        known_attrs = {a.name for a in op_def_registry.get(op_type).attr}
        attrs = {k: v for k, v in op.node_def.attr.items() if k in known_attrs or k.startswith("_")}
        if "U" in known_attrs and "U" not in attrs:
            attrs["U"] = attr_value_pb2.AttrValue(type=tf.float32.as_datatype_enum)
        for name in ports.data_attrs:
            attrs[name] = _with_dtype(attrs[name], self.precision)
        inputs = [
            self.version(t, self.precision if ports.data_inputs[i] else t.dtype, op.device)
            for i, t in enumerate(op.inputs)
        ]
        with self._clean_scope(op.device):
            new_op = self.graph._create_op_internal(
                op_type, inputs, name=f"{op.name}_{short_name(self.precision)}", attrs=attrs,
                compute_device=False,
            )
        new_op._set_device(op.device)
        if op.control_inputs:
            new_op._add_control_inputs([self.replaced.get(c, c) for c in op.control_inputs])
        recast_weights_in_gradient(new_op)
        kernels = self.gradient_kernels.by_input(op)
        if kernels:
            new_op._gradient_function = gradient_with_kernels(framework_ops.get_gradient_function(new_op), kernels)
        self.replaced[op] = new_op
        return new_op

    def reroute(self, old_op: tf.Operation) -> None:
        """Point every live consumer of ``old_op`` (data and control) at its replacement."""
        for tensor in old_op.outputs:
            for consumer in tensor.consumers():
                if consumer in self.replaced:
                    continue
                for index, value in enumerate(consumer.inputs):
                    if value.op is old_op and value.value_index == tensor.value_index:
                        consumer._update_input(index, self.version(tensor, tensor.dtype))
        for consumer in old_op._control_outputs:
            if consumer in self.replaced:
                continue
            controls = [self.replaced.get(c, c) for c in consumer.control_inputs]
            consumer._remove_all_control_inputs()
            consumer._add_control_inputs(controls)

    def remap(self, structure: Any) -> Any:
        """Map tensors/ops of ``structure`` to what computes them now, keeping each tensor's dtype.

        Call it after ``reroute``: casts it has to create are recorded as views.
        """
        self._cast_kind = "view"

        def remap_one(item):
            if isinstance(item, tf.Operation):
                return self.replaced.get(item, item)
            if isinstance(item, tf.Tensor) and item.op in self.replaced:
                return self.version(item, item.dtype)
            return item
        return tf.nest.map_structure(remap_one, structure)

    def remap_collections(self) -> None:
        """Replace rebuilt tensors/ops held in graph collections (end points, losses, summaries...)."""
        for key in self.graph.get_all_collection_keys():
            items = self.graph.get_collection_ref(key)
            for index, item in enumerate(items):
                if isinstance(item, (tf.Tensor, tf.Operation)) and (
                    item in self.replaced or getattr(item, "op", None) in self.replaced
                ):
                    items[index] = self.remap(item)


def rebuild_low_precision(graph: tf.Graph, low: List[tf.Operation], ports: Dict[tf.Operation, OpPorts],
                          precision: tf.DType, gradient_kernels: GradientKernels = GradientKernels()) -> Rebuilder:
    """Rebuild ``low`` (producers first) in ``precision``, re-route their consumers and the graph's collections;
    ``gradient_kernels`` choose how their gradients are computed."""
    rebuilder = Rebuilder(graph, precision, gradient_kernels)
    for op in low:
        rebuilder.rebuild(op, ports[op])
    for op in low:
        rebuilder.reroute(op)
    for op in low:
        defer_weight_casts(rebuilder.replaced[op])
    rebuilder.remap_collections()
    return rebuilder
