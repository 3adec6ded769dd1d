"""``--warmup_epochs``: official TF-Slim's linear warm-up, min(schedule, learning_rate * step / warmup steps)."""

import numpy as np
import tensorflow as tf

from slim_mp.training.learning_rate import LearningRateSettings, make_learning_rate

tf1 = tf.compat.v1
SAMPLES, BATCH = 1000, 10  # 100 steps per epoch
RTOL = 1e-6  # float32 rounding


def rates(settings: LearningRateSettings, steps: list) -> list:
    with tf.Graph().as_default():
        step = tf1.placeholder(tf.int64, ())
        rate = make_learning_rate(settings, step, SAMPLES, BATCH)
        with tf1.Session() as session:
            return [float(session.run(rate, {step: value})) for value in steps]


def test_warmup_rises_linearly_then_meets_the_exponential_staircase():
    settings = LearningRateSettings("exponential", 0.1, learning_rate_decay_factor=0.5, num_epochs_per_decay=1.0,
                                    warmup_epochs=0.5)
    steps = [0, 10, 25, 49, 50, 99, 100, 150, 250]
    # By hand: warm-up over 0.5 * 1000 / 10 = 50 steps, so 0.1 * step / 50; the staircase halves every 100 steps.
    expected = [0.0, 0.02, 0.05, 0.098, 0.1, 0.1, 0.05, 0.05, 0.025]
    np.testing.assert_allclose(rates(settings, steps), expected, rtol=RTOL, atol=1e-9)


def test_fractional_warmup_steps_are_not_rounded_and_cap_a_fixed_rate():
    settings = LearningRateSettings("fixed", 0.3, warmup_epochs=0.025)  # 2.5 steps, as the official float division
    np.testing.assert_allclose(rates(settings, [0, 1, 2, 3, 1000]), [0.0, 0.12, 0.24, 0.3, 0.3], rtol=RTOL)


def test_no_warmup_leaves_the_schedule_alone():
    settings = LearningRateSettings("polynomial", 0.1, end_learning_rate=0.01, num_epochs_per_decay=1.0)
    np.testing.assert_allclose(rates(settings, [0, 50]), [0.1, 0.055], rtol=RTOL)
