"""Fault injection for testing loss scaling: make this process's gradients infinite at chosen steps.

``--fault_nonfinite_steps=3,7`` on one worker of a cluster shows that the step is skipped by
every worker (synchronous replicas) and that the loss scale stays the same everywhere. Steps are
counted per process, from 1, by a local variable on this process's own device, so a restarted
worker counts afresh.
"""

import math
from typing import Sequence

import tensorflow as tf

from slim_mp.loss_scale import GradsAndVars

tf1 = tf.compat.v1


def check_fault_steps(steps: Sequence[int]) -> None:
    """Raise ValueError naming ``--fault_nonfinite_steps`` unless every step is a positive integer."""
    bad = [step for step in steps if step < 1]
    if bad:
        raise ValueError(f"--fault_nonfinite_steps holds {bad}; list steps counted from 1, e.g. 3,7.")


def inject_nonfinite_gradients(grads_and_vars: GradsAndVars, steps: Sequence[int], device: str) -> GradsAndVars:
    """Return ``grads_and_vars`` with the first gradient multiplied by inf at the listed steps of this process.

    ``device`` pins the step counter to this process (under a ``replica_device_setter`` a variable
    would otherwise land on a parameter server and be shared).
    """
    check_fault_steps(steps)
    if not steps:
        return grads_and_vars
    with tf.name_scope("fault_injection"), tf.device(device):
        counter = tf1.Variable(
            0, name="local_step_count", dtype=tf.int64, trainable=False, use_resource=True,
            collections=[tf1.GraphKeys.LOCAL_VARIABLES],
        )
        step = counter.assign_add(1)
        hit = tf.reduce_any(tf.equal(step, tf.constant(list(steps), tf.int64)))
    first = next(index for index, (gradient, _) in enumerate(grads_and_vars) if gradient is not None)
    gradient, variable = grads_and_vars[first]
    factor = tf.where(hit, math.inf, 1.0)
    poisoned = (gradient * tf.cast(factor, gradient.dtype), variable)
    return grads_and_vars[:first] + [poisoned] + grads_and_vars[first + 1:]
