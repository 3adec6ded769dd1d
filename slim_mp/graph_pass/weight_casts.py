"""A weight's low-precision copy is made where a layer needs it and dies there, forward and backward.

A low-precision convolution or matrix product reads its float32 weight through a Cast. That cast
needs nothing but the variable, so TensorFlow's executor runs every one of them when the step
starts; and the layer's gradient (``Conv2DBackpropInput``, the ``MatMul`` of the input's gradient)
reads the same copy, so each stays alive from the step's start to the layer's backward op. At the
step's memory peak, where the backward pass begins, every weight's low copy is alive at once
(about 45 MiB of bfloat16 for ResNet-50). The float32 weight lives all step anyway, so casting it
twice costs no memory, only one more cast per weight per step:

- ``defer_weight_casts``: a forward cast that feeds one layer waits, by control dependencies, for
  the layer before it, so it runs while that layer's outputs are finished.
- ``recast_weights_in_gradient`` gives a rebuilt op a gradient function that builds the usual
  gradient, then points the product it made at a fresh cast of the weight that waits for the
  backward product of the layer after (or, for the last layer, for the incoming gradient): it
  runs when the backward pass reaches that layer, and dies there.

Only the order changes: every value is the same (the same float32 weight, cast the same way).

Leaves alone: a weight cast made on another task than its layer (a parameter server's, ``wire_side``): the
float32 weight does not live on the layer's task, so the low copy is received once, at the step's start,
and read forward and backward (half the bytes the float32 value held there before).

The gradient function lives on the Python ``tf.Operation`` (as ``gradient_override_map`` puts it):
a graph exported and re-imported takes TensorFlow's own gradient, the same values with the
forward cast held.
"""

from typing import Callable, List, Optional, Sequence

import tensorflow as tf
from tensorflow.python.framework import ops as framework_ops

from slim_mp.graph_pass.op_classes import BFLOAT16_CLASSES, fuses_into
from slim_mp.graph_pass.wire_side import on_another_task, variable_behind

_RECAST_SUFFIX = "RecastForGradient"
# Conv/matmul-class op types (the allow list both precisions share): the layers a weight cast waits for.
_LAYER_OP_TYPES = BFLOAT16_CLASSES.allow
# How many ops upstream of a layer the layer before it is looked for (ResNet: BN, Relu, Add, casts).
_MAX_LAYER_DISTANCE = 8


def weight_casts(op: tf.Operation) -> List[tf.Tensor]:
    """The inputs of ``op`` that are a Cast of a variable's value to a float type (the low weight copies), made on
    ``op``'s task: a cast on the variable's task (``wire_side``) is received once and read forward and backward."""
    return [tensor for tensor in op.inputs
            if tensor.op.type == "Cast" and tensor.dtype.is_floating
            and variable_behind(tensor.op.inputs[0]) is not None and not on_another_task(tensor.op.device, op.device)]


def _feeds_only(op: tf.Operation, consumer: tf.Operation) -> bool:
    """True when every output of ``op`` goes to ``consumer`` alone and nothing waits on ``op``."""
    return not op._control_outputs and all(
        all(reader is consumer for reader in output.consumers()) for output in op.outputs)


def _previous_layers(tensors: Sequence[tf.Tensor]) -> List[tf.Operation]:
    """The nearest conv/matmul-class ops upstream of ``tensors`` (within a few ops), or none."""
    found, seen = [], set()
    frontier = [t.op for t in tensors if t.dtype.is_floating]
    for _ in range(_MAX_LAYER_DISTANCE):
        upstream = []
        for producer in frontier:
            if producer in seen:
                continue
            seen.add(producer)
            if producer.type in _LAYER_OP_TYPES:
                found.append(producer)
            else:
                upstream.extend(t.op for t in producer.inputs if t.dtype.is_floating)
        frontier = upstream
    return found


def _fusion_end(layer: tf.Operation) -> tf.Operation:
    """The last op grappler fuses ``layer`` with (its bias add, the activation after it), else ``layer``.

    A control edge out of a fused kernel's first or middle op stops grappler's remapper from fusing
    them (oneDNN then fuses the convolution with its bias alone): a cast that waits for the layer
    waits for the end of its fusion instead, which finishes at the same moment once fused.
    """
    end = layer
    while len(end.outputs) == 1 and len(end.outputs[0].consumers()) == 1 and not end._control_outputs:
        (consumer,) = end.outputs[0].consumers()
        if consumer.inputs[0].op is not end or not fuses_into(consumer):
            break
        end = consumer
    return end


def defer_weight_casts(op: tf.Operation) -> int:
    """Make each weight cast that feeds the conv/matmul-class ``op`` alone wait for the layer before it.

    The layer before (the nearest conv/matmul-class ops upstream) is never fused with ``op`` by
    TensorFlow's graph optimizations, whereas an op in between may be (a Pad, a BiasAdd): a cast
    waiting for that one would wait for its own consumer. The cast waits for the end of that layer's
    own fusion (``_fusion_end``), which is upstream of ``op`` too. Safe from cycles: such a cast
    reaches nothing but ``op``, so nothing upstream of ``op`` can depend on it. Returns how many casts
    were deferred.
    """
    if op.type not in _LAYER_OP_TYPES:
        return 0
    previous = [_fusion_end(layer) for layer in _previous_layers(op.inputs)]
    deferred = 0
    for cast in weight_casts(op):
        if previous and _feeds_only(cast.op, op):
            cast.op._add_control_inputs([p for p in previous if p not in cast.op.control_inputs])
            deferred += 1
    return deferred


def _standard_gradient(op: tf.Operation) -> Optional[Callable]:
    """The gradient function ``tf.gradients`` would use for ``op`` (an override in force included), or None."""
    try:
        return framework_ops.get_gradient_function(op)
    except LookupError:
        return None


def _late_cast_gradient(standard: Callable, casts: List[tf.Tensor]) -> Callable:
    """``standard``, with every read of ``casts`` by the ops it creates moved to a late cast of the weight."""
    def gradient(op: tf.Operation, *output_gradients):
        readers_before = {cast.ref(): set(cast.consumers()) for cast in casts}
        input_gradients = standard(op, *output_gradients)
        arriving = [g for g in output_gradients if g is not None]
        # Wait for the backward product of the layer after (made after ``op``, unlike the forward
        # layers upstream of these gradients too): the cast then runs beside the ops in between,
        # off the critical path. With none near, wait for the incoming gradients themselves.
        arrivals = [p for p in _previous_layers(arriving) if p._id > op._id] or [g.op for g in arriving]
        for cast in casts:
            # Only the products: a ShapeN reads the shape alone, and a cast it waited for could
            # close a cycle once oneDNN fuses Conv2DBackpropFilter (which reads that shape) with BiasAddGrad.
            readers = [r for r in cast.consumers() if r not in readers_before[cast.ref()] and r.type in _LAYER_OP_TYPES]
            if not readers:
                continue
            with tf.control_dependencies(arrivals):
                late = tf.cast(cast.op.inputs[0], cast.dtype, name=f"{cast.op.name.split('/')[-1]}{_RECAST_SUFFIX}")
            for reader in readers:
                for index, value in enumerate(reader.inputs):
                    if value is cast:
                        reader._update_input(index, late)
        return input_gradients
    return gradient


def recast_weights_in_gradient(op: tf.Operation) -> bool:
    """Give the conv/matmul-class ``op`` a gradient function that casts its low weights again where it reads them.

    Returns:
      True when ``op`` is such a layer, reads a cast weight and has a gradient to wrap; False leaves it unchanged.
    """
    casts = weight_casts(op) if op.type in _LAYER_OP_TYPES else []
    standard = _standard_gradient(op) if casts else None
    if standard is None:
        return False
    op._gradient_function = _late_cast_gradient(standard, casts)
    return True
