"""A cast of a variable on another task runs on the variable's side of the wire, and so does its gradient.

Under ``tf.compat.v1.train.replica_device_setter`` the variables live on the parameter servers and
the layers on a worker. A weight's low-precision copy made on the worker pulls the float32 value
over the network each step; made on the variable's device, it sends the low copy, half the bytes:
the same cast of the same float32, so the same value. Its gradient is TensorFlow's own (a cast of
the low-precision gradient back to float32, exact), created on the variable's device too: the
low-precision gradient crosses, and the float32 one is made beside the update it feeds.

An op TensorFlow placed with such a variable reads its float32 value (a regularizer: ``get_variable``
colocates it with its variable); its gradient (weight decay: the weight times a scalar) is made there
too, so the float32 weight never crosses for it and the gradient's terms are summed beside the update.
TF-Slim's layers (Keras-style underneath) create their weight decay's ``L2Loss`` without that
colocation, on the worker: an op that reduces a remote variable's value to a float scalar is moved to
the variable's device, with its gradient, so a scalar crosses instead of the float32 weight.

Only where ops run changes, never what they compute. Leaves alone: everything within one task (a
single process, a worker's own devices), gradient kernels that read a weight in float32 (the
measured placement's ``FLOAT32`` kernel), and what comes after a gradient (loss scaling places its
own ops by the gradient's device).
"""

from typing import Iterable, Optional, Tuple

import tensorflow as tf
from tensorflow.python.framework import ops as framework_ops

from slim_mp.graph_pass.op_classes import VARIABLE_OP_TYPES
from slim_mp.graph_pass.paint import is_variable_read

# The op that reads a resource variable's value into a tensor (a ref variable's is ``paint.is_variable_read``).
_RESOURCE_READ = "ReadVariableOp"
# A device's task: (job, replica, task), None where the device string leaves it open.
Task = Tuple[Optional[str], Optional[int], Optional[int]]


def variable_behind(tensor: tf.Tensor) -> Optional[tf.Operation]:
    """The variable op whose value ``tensor`` is (a resource read, a ref variable or its ``Identity``), else None."""
    op = tensor.op
    if op.type in VARIABLE_OP_TYPES:
        return op
    if op.type == _RESOURCE_READ or is_variable_read(op):
        return op.inputs[0].op
    return None


def _task(device: str) -> Task:
    spec = tf.DeviceSpec.from_string(device)
    return spec.job, spec.replica, spec.task


def on_another_task(device: str, other: str) -> bool:
    """True when ``device`` names a job and ``other`` is not on the same task (``other`` unplaced included)."""
    job, replica, task = _task(device)
    other_job, other_replica, other_task = _task(other)
    return job is not None and (job, replica or 0, task or 0) != (other_job, other_replica or 0, other_task or 0)


def remote_variable_device(tensor: tf.Tensor, reader_device: str) -> str:
    """The device of the variable whose value ``tensor`` is, when it sits on another task than ``reader_device``;
    "" otherwise (not a variable's value, or on the reader's task)."""
    variable = variable_behind(tensor)
    if variable is None:
        return ""
    device = tensor.op.device or variable.device
    return device if on_another_task(device, reader_device) else ""


def keep_gradient_beside(op: tf.Operation, device: str) -> None:
    """Give ``op`` a gradient function that makes TensorFlow's own gradient of it on ``device`` (merged over
    the enclosing device functions, outside any colocation); an op without a gradient function is left as is."""
    try:
        standard = framework_ops.get_gradient_function(op)
    except LookupError:
        return
    if standard is None:
        return

    def gradient(forward: tf.Operation, *output_gradients):
        with forward.graph.colocate_with(None, ignore_existing=True), forward.graph.device(device):
            return standard(forward, *output_gradients)

    op._gradient_function = gradient


def _colocated_variable_device(op: tf.Operation) -> str:
    """The device of the variable ``op`` is colocated with (TensorFlow's ``loc:@`` group), else ""."""
    for group in op.colocation_groups():
        name = group.decode()[len("loc:@"):]
        try:
            variable = op.graph.get_operation_by_name(name)
        except KeyError:
            continue
        if variable.type in VARIABLE_OP_TYPES:
            return variable.device
    return ""


def _reduced_variable_device(op: tf.Operation) -> str:
    """The device of the variable on another task whose float32 value ``op`` reduces to float scalars (the
    ``L2Loss`` of a weight decay that Keras-style layers create without colocating it), else ""."""
    if not op.outputs or not all(out.dtype.is_floating and out.shape.rank == 0 for out in op.outputs):
        return ""
    for tensor in op.inputs:
        if tensor.dtype.is_floating and (tensor.shape.num_elements() or 0) > 1:
            device = remote_variable_device(tensor, op.device)
            if device:
                return device
    return ""


def keep_variable_side_gradients(ops: Iterable[tf.Operation]) -> None:
    """Run on the variable's device, with their gradients, the ops of ``ops`` that read a variable on another task
    only to make something smaller: an op TensorFlow colocated with the variable (a regularizer of
    ``get_variable``) whose readers are elsewhere, and an op on another task that reduces the variable's value to a
    scalar (the weight decay of TF-Slim's layers, placed by the device function on the worker)."""
    for op in ops:
        if op.type in VARIABLE_OP_TYPES or op.type == _RESOURCE_READ or not op.outputs:
            continue
        colocated = _colocated_variable_device(op)
        readers = [reader for output in op.outputs for reader in output.consumers()]
        if colocated and any(on_another_task(colocated, reader.device) for reader in readers):
            keep_gradient_beside(op, colocated)
            continue
        reduced = _reduced_variable_device(op)
        if reduced:
            op._set_device(reduced)
            keep_gradient_beside(op, reduced)
