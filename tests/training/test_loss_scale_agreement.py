"""The training script and the library back off identically for ``--precision=float16`` with default flags.

The script's manager comes from ``LossScaleOptions().manager("float16")`` and is handed to
``enable_mixed_precision`` (as ``train_graph`` does); the library's comes from
``enable_mixed_precision(opt, "float16")`` alone. Both optimizers apply the same fed gradients, so
the managers see the same finite/non-finite steps through the real update path, and both scale
sequences are compared with each other and with the policy written out by hand: start at 2**15,
halve on every overflow, double after 2000 finite steps in a row.
"""

import numpy as np
import tensorflow as tf

import slim_mp
from slim_mp.training.precision_flags import LossScaleOptions

OVERFLOW, FINITE = np.inf, 1.0
# Scale before the first step, then after each of: overflow, overflow, finite, overflow.
EXPECTED_SCALES = [32768.0, 16384.0, 8192.0, 8192.0, 4096.0]
# Then 1999 finite steps in a row keep 4096; the 2000th doubles it.
SCALE_AFTER_1999_FINITE, SCALE_AFTER_2000_FINITE = 4096.0, 8192.0


def _apply_fed_gradient(optimizer: tf.compat.v1.train.Optimizer, scope: str):
    """``(train_op, gradient placeholder, loss-scale tensor)`` for one scalar resource variable."""
    with tf.compat.v1.variable_scope(scope):
        weight = tf.compat.v1.get_variable("weight", [], tf.float32, use_resource=True)
        gradient = tf.compat.v1.placeholder(tf.float32, [], name="gradient")
        train_op = optimizer.apply_gradients([(gradient, weight)])
    return train_op, gradient, optimizer.loss_scale_manager.get_loss_scale()


def test_script_and_library_managers_back_off_identically():
    with tf.Graph().as_default():
        script_optimizer = slim_mp.enable_mixed_precision(
            tf.compat.v1.train.GradientDescentOptimizer(0.1), "float16",
            loss_scale=LossScaleOptions().manager("float16"),
        )
        library_optimizer = slim_mp.enable_mixed_precision(tf.compat.v1.train.GradientDescentOptimizer(0.1), "float16")
        script_step, script_gradient, script_scale = _apply_fed_gradient(script_optimizer, "script")
        library_step, library_gradient, library_scale = _apply_fed_gradient(library_optimizer, "library")

        def run(session, gradients):
            scales = []
            for value in gradients:
                session.run([script_step, library_step], {script_gradient: value, library_gradient: value})
                scales.append(tuple(session.run([script_scale, library_scale])))
            return scales

        with tf.compat.v1.Session() as session:
            session.run([tf.compat.v1.global_variables_initializer(), tf.compat.v1.local_variables_initializer()])
            initial = tuple(session.run([script_scale, library_scale]))
            scales = [initial] + run(session, [OVERFLOW, OVERFLOW, FINITE, OVERFLOW])
            assert [script for script, _ in scales] == [library for _, library in scales]
            assert [script for script, _ in scales] == EXPECTED_SCALES
            after_1999 = run(session, [FINITE] * 1999)[-1]
            assert after_1999 == (SCALE_AFTER_1999_FINITE, SCALE_AFTER_1999_FINITE)
            assert run(session, [FINITE]) == [(SCALE_AFTER_2000_FINITE, SCALE_AFTER_2000_FINITE)]
