"""The train step over clones and replicas: summed clone gradients, one (optionally synchronized) update.

``build_train_step`` turns clones and an optimizer into the tensor a training loop runs. With
``SyncSettings`` the update goes through ``tf.compat.v1.train.SyncReplicasOptimizer``: the
workers' gradients are averaged on the parameter servers, and the loss-scale optimizer inside
checks them for inf/NaN and updates the scale once, on the average, so every worker sees the same
scale and skips the same steps.

Example (one worker of a synchronous cluster)::

    clones = create_clones(model, CloneDevices(num_clones=2, clone_on_cpu=True))
    optimizer = enable_mixed_precision(momentum, "bfloat16", count_skipped_steps=True)
    step = build_train_step(optimizer, clones, global_step, sync=SyncSettings(2, 2))
    # the chief then runs step.sync_optimizer's chief queue runner (see slim_mp.training.session_start)
"""

import dataclasses
from typing import Callable, Optional, Sequence

import tensorflow as tf
import tf_slim as slim

from slim_mp.distribute.clones import Clone, first_clone_update_ops, optimize_clones
from slim_mp.loss_scale import GradsAndVars, LossScaleOptimizer, loss_check, unfolded_slot_initializers

tf1 = tf.compat.v1

GradientTransform = Callable[[GradsAndVars], GradsAndVars]


@dataclasses.dataclass(frozen=True)
class SyncSettings:
    """Synchronous replicas: how many gradients make one update, and how many workers there are."""

    replicas_to_aggregate: int
    total_num_replicas: int


@dataclasses.dataclass(frozen=True)
class TrainStep:
    """What a loop runs (``train_tensor``: the total loss, read after the update) and the sync optimizer, if any."""

    train_tensor: tf.Tensor
    sync_optimizer: Optional[tf1.train.SyncReplicasOptimizer]


def _check_counts_skipped_steps(optimizer: tf1.train.Optimizer) -> None:
    """Raise ValueError if a loss-scale optimizer would skip steps without advancing the global step."""
    if isinstance(optimizer, LossScaleOptimizer) and not optimizer.counts_skipped_steps:
        raise ValueError(
            "synchronous replicas need the loss-scale optimizer to advance global_step on skipped steps "
            "(the gradient accumulators advance on every update); create it with count_skipped_steps=True."
        )


def _apply_with_averages(apply: tf.Operation, averages: tf1.train.ExponentialMovingAverage) -> tf.Operation:
    """Run ``apply``, then update the moving averages of the model variables."""
    with tf.control_dependencies([apply]):
        return averages.apply(slim.get_model_variables())


def build_train_step(
    optimizer: tf1.train.Optimizer,
    clones: Sequence[Clone],
    global_step: tf.Variable,
    var_list: Optional[Sequence[tf.Variable]] = None,
    sync: Optional[SyncSettings] = None,
    moving_average_decay: Optional[float] = None,
    transform_gradients: Optional[GradientTransform] = None,
) -> TrainStep:
    """Build one train step: clone gradients summed, transformed if asked, applied once; first clone's BN updates.

    ``moving_average_decay`` keeps exponential moving averages of the model variables (updated by
    the chief's aggregation under ``sync``, as TF-Slim's script does). The total loss is checked
    for inf/NaN, which stops the run with an error (a non-finite *gradient* is loss scaling's job).
    The optimizer's slots start on buffers of their own in every precision, float32 too
    (``unfolded_slot_initializers``): the same values, no slot-sized copy kept after the first update.
    """
    total_loss, grads_and_vars = optimize_clones(optimizer, clones, var_list)
    if transform_gradients is not None:
        grads_and_vars = transform_gradients(grads_and_vars)
    averages = tf1.train.ExponentialMovingAverage(moving_average_decay, global_step) if moving_average_decay else None
    sync_optimizer = None
    if sync is not None:
        _check_counts_skipped_steps(optimizer)
        sync_optimizer = tf1.train.SyncReplicasOptimizer(
            optimizer, sync.replicas_to_aggregate, sync.total_num_replicas,
            variable_averages=averages,
            variables_to_average=slim.get_model_variables() if averages else None,
        )
    with unfolded_slot_initializers():
        if sync_optimizer is not None:
            apply = sync_optimizer.apply_gradients(grads_and_vars, global_step)
        else:
            apply = optimizer.apply_gradients(grads_and_vars, global_step)
            if averages is not None:
                apply = _apply_with_averages(apply, averages)
    checked_loss = loss_check(total_loss)
    with tf.control_dependencies([apply, *first_clone_update_ops(clones)]):
        train_tensor = tf.identity(checked_loss, name="train_op")
    return TrainStep(train_tensor, sync_optimizer)
