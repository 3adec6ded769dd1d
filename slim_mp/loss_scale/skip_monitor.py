"""Count the steps that loss scaling skipped, and stop a run that only skips.

The counters are local variables: they describe the current run, and a default
``tf.compat.v1.train.Saver`` neither writes nor expects them (so a TF 1.15
contrib checkpoint still restores). They also initialise themselves on first
use, so a contrib-style loop that runs only ``global_variables_initializer``
works; ``local_variables_initializer`` (run by ``slim.learning.train``,
``MonitoredTrainingSession`` and ``Supervisor``) resets them to zero as well.
"""

import dataclasses
from typing import Sequence, Tuple

import tensorflow as tf

from slim_mp.loss_scale.divergence import GUARD_SENTENCE_END, GUARD_SENTENCE_START
from slim_mp.loss_scale.finite_check import Gradient

CULPRITS_SHOWN = 5


@dataclasses.dataclass(frozen=True)
class SkipCounters:
    """The run's skipped-step total and the current streak of skips at the minimum loss scale."""

    skipped_steps: tf.Variable
    skips_in_a_row_at_min: tf.Variable


def _local_counter(name: str, dtype: tf.DType) -> tf.Variable:
    """Create a zero-initialised, non-trainable variable in LOCAL_VARIABLES."""
    return tf.compat.v1.Variable(
        0,
        name=name,
        dtype=dtype,
        trainable=False,
        use_resource=True,
        collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES],
    )


def create_skip_counters() -> SkipCounters:
    """Create both counters under ``skip_counters`` in the current name scope, outside any control flow."""
    with tf.init_scope(), tf.name_scope("skip_counters"):
        return SkipCounters(
            skipped_steps=_local_counter("skipped_steps", tf.int64),
            skips_in_a_row_at_min=_local_counter("skips_in_a_row_at_min", tf.int32),
        )


def _zero_if_uninitialised(counter: tf.Variable) -> tf.Operation:
    """Return an op that sets ``counter`` to zero unless it already holds a value (lazy initialisation).

    Built next to the counter (on its parameter server in a cluster), so the check and the assignment
    run in one place.
    """
    with tf.compat.v1.colocate_with(counter):
        return tf.group(tf.cond(
            counter.is_initialized(),
            tf.no_op,
            lambda: tf.group(counter.assign(tf.zeros([], counter.dtype), read_value=False)),
        ))


def read_counter(counter: tf.Variable) -> tf.Tensor:
    """Read ``counter``; zero while it is uninitialised (before the first step of a run)."""
    with tf.compat.v1.colocate_with(counter):
        return tf.cond(counter.is_initialized(), counter.read_value, lambda: tf.zeros([], counter.dtype))


def record_step(
    counters: SkipCounters, all_finite: tf.Tensor, at_min_loss_scale: tf.Tensor
) -> Tuple[tf.Operation, tf.Tensor]:
    """Return (update op, new streak): count a skipped step, and extend or reset the streak at the minimum scale."""
    with tf.name_scope("record_skipped_step"):
        initialise = [_zero_if_uninitialised(counters.skips_in_a_row_at_min),
                      _zero_if_uninitialised(counters.skipped_steps)]
        with tf.control_dependencies(initialise):
            previous_streak = counters.skips_in_a_row_at_min.read_value()
        skipped = tf.logical_not(all_finite)
        streak = tf.where(
            tf.logical_and(skipped, at_min_loss_scale),
            previous_streak + 1,
            0,
        )
        with tf.control_dependencies(initialise):
            update = tf.group(
                counters.skips_in_a_row_at_min.assign(streak, read_value=False),
                counters.skipped_steps.assign_add(tf.cast(skipped, tf.int64), read_value=False),
            )
        return update, streak


def _divergence_message(
    limit: int, variables: Sequence[tf.Variable], finite: tf.Tensor, loss_scale: tf.Tensor
) -> tf.Tensor:
    """Build the guard's error sentence, naming the first variables whose gradients were non-finite."""
    culprits = tf.boolean_mask(tf.constant([v.op.name for v in variables]), tf.logical_not(finite))
    return tf.strings.join(
        [
            f"{GUARD_SENTENCE_START}: {limit} steps in a row were skipped with the loss scale at its minimum (",
            tf.strings.as_string(loss_scale, shortest=True),
            "), because the gradients of ",
            tf.strings.as_string(tf.size(culprits)),
            " variable(s) hold inf or NaN even unscaled, first: ",
            tf.strings.reduce_join(culprits[:CULPRITS_SHOWN], separator=", "),
            f". {GUARD_SENTENCE_END}",
        ]
    )


def divergence_guard(
    streak: tf.Tensor,
    limit: int,
    grads_and_vars: Sequence[Tuple[Gradient, tf.Variable]],
    finite: tf.Tensor,
    loss_scale: tf.Tensor,
) -> tf.Operation:
    """Return an op that raises InvalidArgumentError once ``streak`` reaches ``limit``.

    ``finite`` is the per-gradient flag vector of ``grads_and_vars``; the
    message naming the culprits is built only inside the failing branch.
    """

    def fail() -> tf.Operation:
        message = _divergence_message(limit, [v for _, v in grads_and_vars], finite, loss_scale)
        return tf.debugging.Assert(False, [message])

    with tf.name_scope("divergence_guard"):
        return tf.group(tf.cond(streak >= limit, fail, tf.no_op))
