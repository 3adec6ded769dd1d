"""Optimizer choices and learning-rate schedules of the training script, against closed-form references."""

import math

import numpy as np
import pytest
import tensorflow as tf

from slim_mp.training.learning_rate import LearningRateSettings, make_learning_rate
from slim_mp.training.optimizers import OPTIMIZER_NAMES, OptimizerSettings, make_optimizer

tf1 = tf.compat.v1
SAMPLES, BATCH = 1000, 50  # 20 steps per epoch
RTOL = 1e-6  # float32 rounding of the schedule


def schedule_values(settings: LearningRateSettings, steps) -> list:
    with tf.Graph().as_default():
        step = tf1.placeholder(tf.int64, ())
        rate = make_learning_rate(settings, step, SAMPLES, BATCH)
        with tf1.Session() as session:
            return [session.run(rate, {step: s}) for s in steps]


def test_exponential_decay_is_a_staircase_every_num_epochs_per_decay():
    settings = LearningRateSettings("exponential", 0.1, learning_rate_decay_factor=0.5, num_epochs_per_decay=2.0)
    steps = [0, 39, 40, 79, 80, 200]
    expected = [0.1 * 0.5 ** math.floor(s / 40) for s in steps]
    np.testing.assert_allclose(schedule_values(settings, steps), expected, rtol=RTOL)


def test_polynomial_decay_falls_linearly_then_stays_at_the_end_rate():
    settings = LearningRateSettings("polynomial", 0.1, end_learning_rate=0.01, num_epochs_per_decay=1.0)
    steps = [0, 5, 10, 20, 50]
    expected = [(0.1 - 0.01) * (1 - min(s, 20) / 20) + 0.01 for s in steps]
    np.testing.assert_allclose(schedule_values(settings, steps), expected, rtol=RTOL)


def test_fixed_rate_never_changes():
    np.testing.assert_allclose(schedule_values(LearningRateSettings("fixed", 0.3), [0, 1000]), [0.3, 0.3], rtol=RTOL)


def test_unknown_schedule_and_too_short_period_name_their_flags():
    with pytest.raises(ValueError, match="--learning_rate_decay_type='cosine'"):
        schedule_values(LearningRateSettings("cosine"), [0])
    with pytest.raises(ValueError, match="--num_epochs_per_decay"):
        schedule_values(LearningRateSettings("exponential", num_epochs_per_decay=0.01), [0])


@pytest.mark.parametrize("name", OPTIMIZER_NAMES)
def test_every_optimizer_lowers_a_quadratic(name):
    with tf.Graph().as_default():
        weight = tf1.get_variable("w", initializer=tf.constant([3.0, -2.0]), use_resource=True)
        loss = tf.reduce_sum(tf.square(weight))
        train_op = make_optimizer(OptimizerSettings(optimizer=name), 0.1).minimize(loss)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            before = session.run(loss)
            for _ in range(5):
                session.run(train_op)
            assert session.run(loss) < before


def test_optimizer_knobs_reach_the_optimizer():
    with tf.Graph().as_default():
        optimizer = make_optimizer(OptimizerSettings(optimizer="momentum", momentum=0.42), 0.1)
        assert optimizer._momentum == 0.42  # the knob, not the default 0.9


def test_unknown_optimizer_names_the_flag():
    with pytest.raises(ValueError, match="--optimizer='lamb'.*rmsprop"):
        make_optimizer(OptimizerSettings(optimizer="lamb"), 0.1)
