"""Model clones: several copies of the network in one process (one per GPU, or all on the CPU).

The clones share one set of variables. Each clone computes its share of the loss on its own
batch; their gradients are summed into one list, so an optimizer (and loss scaling) sees a
single step: one finite check, one loss-scale update, one apply.

Example::

    devices = CloneDevices(num_clones=2, clone_on_cpu=True)
    def model():
        images, labels = iterator.get_next()
        logits, _ = network_fn(images)
        tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    clones = create_clones(model, devices)
    total_loss, grads_and_vars = optimize_clones(optimizer, clones)
    train_op = optimizer.apply_gradients(grads_and_vars, global_step)
"""

import contextlib
import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from slim_mp.config_fields import ArgumentError, argument
from slim_mp.graph_pass import VARIABLE_OP_TYPES
from slim_mp.loss_scale import GradsAndVars, Gradient, LossScaleOptimizer, beside

tf1 = tf.compat.v1

CPU = "/device:CPU:0"


@dataclasses.dataclass(frozen=True)
class CloneDevices:
    """How many clones, and where they and the shared variables live.

    One clone runs where TensorFlow places it (``clone_on_cpu`` pins it and the variables to the
    CPU). Several clones run on ``/device:GPU:<i>`` (or all on the CPU) with the variables on the
    CPU, as TF-Slim's model_deploy does. With parameter servers (``variables_on_ps``) the variables are
    left to an enclosing ``replica_device_setter``.
    """

    num_clones: int = 1
    clone_on_cpu: bool = False
    variables_on_ps: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.num_clones, bool) or not isinstance(self.num_clones, int) or self.num_clones < 1:
            raise ArgumentError(f"{argument('num_clones')}={self.num_clones} must be a positive integer; pass e.g. "
                                f"{argument('num_clones')}=2.")

    def scope(self, index: int) -> str:
        """The name scope of clone ``index``: none for a single clone (op names as without clones)."""
        return f"clone_{index}" if self.num_clones > 1 else ""

    def compute_device(self, index: int) -> str:
        """The device of clone ``index``'s ops ("" leaves the choice to TensorFlow)."""
        if self.clone_on_cpu:
            return CPU
        return f"/device:GPU:{index}" if self.num_clones > 1 else ""

    def variables_device(self) -> str:
        """The device of the shared variables ("" leaves it to TensorFlow or an enclosing device setter)."""
        if self.variables_on_ps or (self.num_clones == 1 and not self.clone_on_cpu):
            return ""
        return CPU

    def device_function(self, index: int) -> Callable[[tf.Operation], str]:
        """A ``tf.device`` function: variable ops to the variables' device, the rest to clone ``index``."""
        compute, variables = self.compute_device(index), self.variables_device()

        def choose(op: tf.Operation) -> str:
            return variables if op.type in VARIABLE_OP_TYPES else compute

        return choose


def scope_filter(scope: str) -> Optional[str]:
    """The collection filter of a clone scope: "clone_1/" (so it cannot match clone_10), None for the top level."""
    return f"{scope}/" if scope else None


def _name_scope(scope: str):
    """Enter name scope ``scope``; stay in the current one when it is empty."""
    return tf.name_scope(scope) if scope else contextlib.nullcontext()


def _device(device: Any):
    """Enter device scope ``device``; keep the enclosing ones when it is empty (``tf.device(None)`` clears them)."""
    return tf1.device(device) if device else contextlib.nullcontext()


@dataclasses.dataclass(frozen=True)
class Clone:
    """One copy of the model: what ``model_fn`` returned, its scope and device, and its share of the loss."""

    index: int
    scope: str
    device: str
    outputs: Any
    loss: tf.Tensor


def _clone_loss(scope: str, num_clones: int, with_regularization: bool) -> tf.Tensor:
    """Sum the LOSSES of ``scope`` divided by ``num_clones``, plus the regularization losses on request."""
    losses = tf1.losses.get_losses(scope=scope_filter(scope))
    if not losses:
        raise ValueError(
            f"clone scope {scope or '(top level)'!r} added no loss; model_fn must add its losses with "
            "tf.compat.v1.losses (e.g. softmax_cross_entropy)."
        )
    total = tf.math.add_n(losses, name="clone_loss")
    if num_clones > 1:
        total = tf.math.divide(total, float(num_clones), name="scaled_clone_loss")
    if with_regularization:
        regularization = tf1.losses.get_regularization_losses()
        if regularization:
            total = tf.math.add(total, tf.math.add_n(regularization), name="clone_loss_with_regularization")
    return total


def create_clones(model_fn: Callable[[], Any], devices: CloneDevices) -> List[Clone]:
    """Build ``model_fn()`` once per clone, under the clone's name scope and device; return the clones.

    The first clone creates the variables and the others reuse them. ``model_fn`` adds its losses
    to ``tf.compat.v1.losses``; a clone's loss is the sum of its own divided by the number of
    clones, and the first clone also carries the regularization losses, so the clone losses add
    up to the loss of one big batch.

    Args:
      model_fn: builds the network on its own batch and adds its losses to ``tf.compat.v1.losses``;
        called once per clone, with no arguments.
      devices: how many clones and on which devices (``CloneDevices``).

    Returns:
      The clones in order, each with ``model_fn``'s return value (``outputs``) and its ``loss``.

    Raises:
      ValueError: if a clone's call of ``model_fn`` added no loss.
    """
    clones = []
    for index in range(devices.num_clones):
        scope = devices.scope(index)
        reuse = True if index > 0 else None
        placed = devices.compute_device(index) or devices.variables_device()
        with tf1.variable_scope(tf1.get_variable_scope(), reuse=reuse, auxiliary_name_scope=False), \
                _name_scope(scope), \
                _device(devices.device_function(index) if placed else None):
            outputs = model_fn()
            loss = _clone_loss(scope, devices.num_clones, with_regularization=index == 0)
        clones.append(Clone(index, scope, devices.compute_device(index), outputs, loss))
    return clones


def _sum_gradients(gradients: Sequence[Gradient]) -> Gradient:
    """Add one variable's gradients from several clones; IndexedSlices are concatenated, staying sparse.

    In a cluster the sum runs where the first clone's gradient was made (``beside``): gradients made on a
    parameter server beside their update are summed there, not sent to the worker and back.
    """
    if len(gradients) == 1:
        return gradients[0]
    if all(isinstance(g, tf.IndexedSlices) for g in gradients):
        return tf.IndexedSlices(
            tf.concat([g.values for g in gradients], 0),
            tf.concat([g.indices for g in gradients], 0),
            gradients[0].dense_shape,
        )
    with beside(gradients[0]):
        return tf.math.add_n([tf.convert_to_tensor(g) for g in gradients], name="sum_clone_gradients")


def sum_clone_gradients(per_clone: Sequence[GradsAndVars]) -> GradsAndVars:
    """Sum the gradients of each variable over the clones; a variable no clone reaches keeps ``None``."""
    order: List[tf.Variable] = []
    collected: Dict[int, List[Gradient]] = {}
    for grads_and_vars in per_clone:
        for gradient, variable in grads_and_vars:
            if id(variable) not in collected:
                order.append(variable)
                collected[id(variable)] = []
            if gradient is not None:
                collected[id(variable)].append(gradient)
    with tf.name_scope("sum_clone_gradients"):
        return [(_sum_gradients(collected[id(v)]) if collected[id(v)] else None, v) for v in order]


def optimize_clones(
    optimizer: tf1.train.Optimizer, clones: Sequence[Clone], var_list: Optional[Sequence[tf.Variable]] = None
) -> Tuple[tf.Tensor, GradsAndVars]:
    """Return ``(total loss, gradients summed over the clones)`` for one ``apply_gradients`` call.

    A ``LossScaleOptimizer`` first maps the clone losses through its ``rewrite_losses``: a
    ``MixedPrecisionOptimizer`` rewrites them all in one pass before any gradient is taken. Each
    clone's gradients are computed on its device.

    Args:
      optimizer: computes each clone's gradients (a ``LossScaleOptimizer`` returns them unscaled).
      clones: what ``create_clones`` returned.
      var_list: the variables to differentiate; None means all trainable variables.

    Returns:
      ``(total_loss, grads_and_vars)``: the sum of the clone losses (the rewritten ones under mixed
      precision) and, per variable, its gradients summed over the clones (None where no clone
      reaches it), ready for ``optimizer.apply_gradients``.

    Raises:
      ValueError: if there is no variable to differentiate, or (mixed precision) the graph pass
        refuses its options or finds gradients already taken of the clone losses.
      TypeError: (mixed precision) for an unknown keyword in the graph pass's options.
    """
    losses = [clone.loss for clone in clones]
    if isinstance(optimizer, LossScaleOptimizer):
        losses = optimizer.rewrite_losses(losses)
    per_clone = []
    for clone, loss in zip(clones, losses):
        with _name_scope(clone.scope), _device(clone.device):
            per_clone.append(optimizer.compute_gradients(loss, var_list=var_list, colocate_gradients_with_ops=True))
    total_loss = losses[0] if len(losses) == 1 else tf.math.add_n(losses, name="total_loss")
    return total_loss, sum_clone_gradients(per_clone)


def first_clone_update_ops(clones: Sequence[Clone]) -> List[tf.Operation]:
    """The UPDATE_OPS (batch-norm moving averages) of the first clone, the only ones a train step runs."""
    return tf1.get_collection(tf1.GraphKeys.UPDATE_OPS, scope_filter(clones[0].scope))
