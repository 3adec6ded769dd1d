"""A standalone copy of the region, for timing whole training steps of candidate placements.

The per-op estimate (``estimate``) adds up the allow ops and the casts. It leaves out what goes
low around them (batch norm, activations, pooling, dropout), oneDNN's layout reorders and how the
ops overlap, and on small networks these decide: cifarnet's fully connected layers are each faster
in bfloat16, yet the estimate kept them float32. So when several placements are close by the
estimate, each is applied to its own copy of the region and the copies' steps are timed against
each other (``whole_steps``).

A copy holds the region's ops with their shapes and attributes, minus what lies outside the
computation: variable reads, input ops (``Placeholder``, ``IteratorGetNext``, ...) and large
constants (a benchmark's fixed images) become random variables of the same shapes and types
(``Substitute``), and stateful ops other than random numbers (variable updates, readers) are left
out, their inputs still computed.

A large batch makes every whole step long, and the check times each step at least three times
(its warm-up and two rounds): ``at_batch`` gives the copy fed with fewer examples, which
``smaller_for_timing`` keeps when the graph builds with it (no constant holds the batch size).
"""

import dataclasses
import hashlib
import warnings
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from slim_mp.graph_pass.op_classes import FUNCTION_OP_TYPES, RANDOM_OP_TYPES, SOURCE_OP_TYPES
from slim_mp.graph_pass.paint import is_variable_read
from slim_mp.graph_pass.region import Region

# Source ops a copy keeps: constants, and defaults it can compute itself.
_KEPT_SOURCE_TYPES = frozenset({"Const", "PlaceholderWithDefault"})
# A constant with at least this many elements is data (a benchmark's fixed batch), not a parameter: a substitute.
_DATA_CONSTANT_ELEMENTS = 1 << 14
# The most dimensions a shape vector has (an integer constant this long or shorter may be one).
_MAX_SHAPE_RANK = 8


@dataclasses.dataclass(frozen=True)
class Substitute:
    """A tensor from outside the copied computation, replaced by a random variable of its shape and type."""

    tensor_name: str
    shape: Tuple[int, ...]
    dtype: tf.DType
    trainable: bool
    is_input: bool = False


@dataclasses.dataclass(frozen=True)
class RegionCopy:
    """A standalone copy of a region: its ops, what replaces their outside inputs, what one step computes."""

    graph_def: graph_pb2.GraphDef
    substitutes: Tuple[Substitute, ...]
    objectives: Tuple[str, ...]
    sinks: Tuple[str, ...]
    # When fed fewer examples than the step (``at_batch``): the step's own batch.
    full_batch: Optional[int] = None

    def batch(self) -> Optional[int]:
        """The examples a step feeds: the first dimension of the largest input, when every input of at least
        two dimensions starts with it; None when there is no such batch."""
        inputs = [s for s in self.substitutes if s.is_input and len(s.shape) >= 2]
        if not inputs:
            return None
        batch = max(inputs, key=lambda s: int(np.prod(s.shape, dtype=np.int64))).shape[0]
        return batch if all(s.shape[0] == batch for s in inputs) else None

    def at_batch(self, examples: int) -> "RegionCopy":
        """This copy fed ``examples`` of its ``batch()``: the inputs of that first dimension cut down, as are the
        small constants of that first dimension (a benchmark's fixed labels, then random like the inputs) and
        the shape vectors that start with the batch size (the ``[batch, ...]`` TensorFlow folds into constants
        for ``ones_like``, a ``reshape(x, [batch, -1])``)."""
        batch = self.batch()
        substitutes = [dataclasses.replace(s, shape=(examples,) + s.shape[1:])
                       if s.is_input and s.shape and s.shape[0] == batch else s for s in self.substitutes]
        graph_def = graph_pb2.GraphDef()
        graph_def.CopyFrom(self.graph_def)
        for node in graph_def.node:
            if node.op != "Const":
                continue
            value = tf.make_ndarray(node.attr["value"].tensor)
            if value.ndim >= 1 and value.shape[0] == batch:
                dtype = tf.as_dtype(node.attr["dtype"].type)
                substitutes.append(Substitute(f"{node.name}:0", (examples,) + value.shape[1:], dtype, False, True))
            elif value.ndim == 1 and 0 < value.size <= _MAX_SHAPE_RANK and value.dtype.kind == "i" \
                    and value[0] == batch:
                value = value.copy()
                value[0] = examples
                node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value))
        return dataclasses.replace(self, graph_def=graph_def, substitutes=tuple(substitutes), full_batch=batch)

    def digest(self) -> str:
        """A stable key of the copy (ops, attributes, shapes, substitutes) for the timing cache."""
        content = hashlib.sha1(self.graph_def.SerializeToString(deterministic=True))
        content.update(repr([(s.tensor_name, s.shape, s.dtype.name, s.trainable) for s in self.substitutes]).encode())
        content.update(repr((self.objectives, self.sinks)).encode())
        return content.hexdigest()[:20]


def _variable_of_read(op: tf.Operation) -> tf.Operation:
    return op.inputs[0].op


def _is_data_constant(op: tf.Operation) -> bool:
    return op.type == "Const" and op.outputs[0].shape.num_elements() >= _DATA_CONSTANT_ELEMENTS


def _outside(op: tf.Operation) -> bool:
    """Whether ``op`` lies outside the copied computation (its outputs become substitutes, if used)."""
    if is_variable_read(op) or op.type in SOURCE_OP_TYPES - _KEPT_SOURCE_TYPES or _is_data_constant(op):
        return True
    return op.op_def.is_stateful and op.type not in RANDOM_OP_TYPES


def _sinks(region: Region) -> List[tf.Operation]:
    """The region's ops nothing in the region consumes (the fetches and the update ops)."""
    consumed = {t.op for op in region.ops for t in op.inputs} | {c for op in region.ops for c in op.control_inputs}
    return [op for op in region.ops if op not in consumed]


def _substitute(tensor: tf.Tensor, trainable_variables: Set[str]) -> Substitute:
    if not tensor.shape.is_fully_defined():
        raise ValueError(f"{tensor.name} has no static shape ({tensor.shape})")
    dtype = tensor.dtype.base_dtype
    if not (dtype.is_floating or dtype.is_integer or dtype == tf.bool):
        raise ValueError(f"{tensor.name} is a {dtype.name} tensor from outside the computation")
    op = tensor.op
    is_variable = is_variable_read(op) or op.type == "ReadVariableOp"
    trainable = is_variable and _variable_of_read(op).name in trainable_variables
    return Substitute(tensor.name, tuple(tensor.shape.as_list()), dtype, trainable, is_input=not is_variable)


def copy_region(region: Region, objectives: Sequence[tf.Tensor]) -> RegionCopy:
    """The standalone copy of ``region`` computing ``objectives`` (float tensors) and the region's sinks.

    Raises:
      ValueError: when the copy cannot stand alone (TF1 control flow, function calls, an outside
        input without a static shape or of a type a random variable cannot stand for).
    """
    trainable_variables = {v.op.name for v in region.graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)}
    roots: List[tf.Operation] = []
    for op in [t.op for t in objectives] + _sinks(region):
        roots.extend([op] if not _outside(op) else [t.op for t in op.inputs if not _outside(t.op)])
    kept: Dict[str, tf.Operation] = {}
    substitutes: Dict[str, Substitute] = {}
    stack = list(roots)
    while stack:
        op = stack.pop()
        if op.name in kept:
            continue
        if op._get_control_flow_context() is not None or op.type in FUNCTION_OP_TYPES:
            raise ValueError(f"{op.name} ({op.type}) runs inside control flow or a function")
        kept[op.name] = op
        for tensor in op.inputs:
            if _outside(tensor.op):
                substitutes.setdefault(tensor.name, _substitute(tensor, trainable_variables))
            else:
                stack.append(tensor.op)
        stack.extend(c for c in op.control_inputs if not _outside(c))
    graph_def = graph_pb2.GraphDef()
    graph_def.versions.CopyFrom(region.graph.graph_def_versions)
    for op in region.ops:
        if op.name not in kept:
            continue
        node = graph_def.node.add()
        node.CopyFrom(op.node_def)
        node.ClearField("device")
        if "_class" in node.attr:
            del node.attr["_class"]
        inputs = [name for name in node.input if not name.startswith("^") or name[1:] in kept]
        del node.input[:]
        node.input.extend(inputs)
    sinks = tuple(sorted({op.name for op in roots}))
    return RegionCopy(graph_def, tuple(substitutes[name] for name in sorted(substitutes)),
                      tuple(t.name for t in objectives), sinks)


def smaller_for_timing(copy: RegionCopy, max_batch: int) -> RegionCopy:
    """``copy`` fed at most ``max_batch`` examples (``at_batch``) when its batch is larger and its graph builds
    so (shape inference finds every shape consistent); else ``copy`` itself."""
    batch = copy.batch()
    if batch is None or batch <= max_batch:
        return copy
    smaller = copy.at_batch(max_batch)
    graph = tf.Graph()
    with graph.as_default():
        inputs = {s.tensor_name: tf.compat.v1.placeholder(s.dtype, s.shape) for s in smaller.substitutes}
        try:
            tf.graph_util.import_graph_def(smaller.graph_def, input_map=inputs, name="")
        except ValueError:
            return copy
    return smaller


def copy_for_timing(region: Region, objectives: Sequence[tf.Tensor]) -> Tuple[Optional[RegionCopy], str]:
    """(the standalone copy of ``region``, "") or (None, why it cannot be copied), with a warning.

    Without a copy no whole step is timed: the search decides on the per-op estimate and the
    chosen placement goes unchecked (``step_check.not_checked`` records why).
    """
    try:
        return copy_region(region, objectives), ""
    except ValueError as error:
        warnings.warn(f"placement: cannot time whole steps ({error}); deciding on the per-op estimate.",
                      stacklevel=3)
        return None, f"the region cannot be copied ({error})"
