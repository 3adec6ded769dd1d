"""The learning-rate schedules of TF-Slim's training script: fixed, exponential (staircase) and polynomial decay.

Any schedule can start with the official linear warm-up (``--warmup_epochs``): the rate is capped by
``learning_rate * step / warmup_steps``, so it rises from 0 and meets the schedule after that many epochs.
"""

import dataclasses

import tensorflow as tf

from slim_mp.config_fields import option

DECAY_TYPES = ("fixed", "exponential", "polynomial")


@dataclasses.dataclass(frozen=True)
class LearningRateSettings:
    """The schedule knobs, named and defaulted as the flags of ``train_image_classifier.py``."""

    learning_rate_decay_type: str = option(
        "exponential", "How the learning rate decays: fixed, exponential or polynomial."
    )
    learning_rate: float = option(0.01, "Initial learning rate.")
    end_learning_rate: float = option(0.0001, "The minimal learning rate of the polynomial decay.")
    learning_rate_decay_factor: float = option(0.94, "Learning rate decay factor.")
    num_epochs_per_decay: float = option(2.0, "Number of epochs after which the learning rate decays.")
    warmup_epochs: float = option(
        0.0, "Linearly warm the learning rate up from 0 to --learning_rate over this many epochs; 0 for no warm-up."
    )


def check_decay_type(decay_type: str) -> None:
    """Raise ValueError naming ``--learning_rate_decay_type`` unless it is one of ``DECAY_TYPES``."""
    if decay_type not in DECAY_TYPES:
        raise ValueError(
            f"--learning_rate_decay_type={decay_type!r} is not a known schedule; use one of {', '.join(DECAY_TYPES)}."
        )


def decay_steps(num_samples_per_epoch: int, batch_size: int, num_epochs_per_decay: float) -> int:
    """Return how many steps one decay period lasts: ``num_epochs_per_decay`` epochs of ``batch_size`` images."""
    steps = int(num_samples_per_epoch * num_epochs_per_decay / batch_size)
    if steps < 1:
        raise ValueError(
            f"--num_epochs_per_decay={num_epochs_per_decay} gives decay periods shorter than one step "
            f"({num_samples_per_epoch} images per epoch, batch {batch_size}); raise --num_epochs_per_decay."
        )
    return steps


def make_learning_rate(
    settings: LearningRateSettings, global_step: tf.Tensor, num_samples_per_epoch: int, batch_size: int
) -> tf.Tensor:
    """Return the learning-rate tensor of ``settings`` at ``global_step`` (float32 scalar).

    ``exponential`` multiplies the rate by the decay factor once per period (staircase);
    ``polynomial`` falls linearly to ``end_learning_rate`` over one period and then stays there.
    With ``warmup_epochs`` the result is the smaller of the schedule and the warm-up line
    ``learning_rate * step / (warmup_epochs * num_samples_per_epoch / batch_size)``, as official TF-Slim
    computes it (the epoch is not rounded to whole steps).
    """
    rate = _decayed_rate(settings, global_step, num_samples_per_epoch, batch_size)
    if not settings.warmup_epochs:
        return rate
    warmup_steps = settings.warmup_epochs * num_samples_per_epoch / batch_size
    warmup = settings.learning_rate * tf.cast(global_step, tf.float32) / warmup_steps
    return tf.minimum(warmup, rate, name="warmup_learning_rate")


def _decayed_rate(
    settings: LearningRateSettings, global_step: tf.Tensor, num_samples_per_epoch: int, batch_size: int
) -> tf.Tensor:
    """The schedule of ``--learning_rate_decay_type`` alone, before any warm-up."""
    kind = settings.learning_rate_decay_type
    check_decay_type(kind)
    if kind == "fixed":
        return tf.constant(settings.learning_rate, tf.float32, name="fixed_learning_rate")
    period = decay_steps(num_samples_per_epoch, batch_size, settings.num_epochs_per_decay)
    if kind == "exponential":
        return tf.compat.v1.train.exponential_decay(
            settings.learning_rate, global_step, period, settings.learning_rate_decay_factor,
            staircase=True, name="exponential_decay_learning_rate",
        )
    return tf.compat.v1.train.polynomial_decay(
        settings.learning_rate, global_step, period, settings.end_learning_rate,
        power=1.0, cycle=False, name="polynomial_decay_learning_rate",
    )
