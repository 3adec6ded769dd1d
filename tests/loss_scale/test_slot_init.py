"""Slots from run-time fills: the unwrapped optimizer's values bit for bit, and no slot-sized copy kept after step 1."""

import numpy as np
import pytest
import tensorflow as tf
from graph_checks import live_bytes_per_step

from slim_mp.loss_scale import FixedLossScaleManager, LossScaleOptimizer, NoLossScaling

tf1 = tf.compat.v1

# Distinct shapes: grappler folds the slots' zeros into one constant per shape.
SHAPES = [(64 + i, 128) for i in range(6)]
# One slot of each: zeros (Momentum), ones (RMSProp's rms), a scalar constant (Adagrad's accumulator).
OPTIMIZERS = {
    "momentum": lambda: tf1.train.MomentumOptimizer(0.01, 0.9),
    "rmsprop": lambda: tf1.train.RMSPropOptimizer(0.01, momentum=0.5),
    "adagrad": lambda: tf1.train.AdagradOptimizer(0.01, initial_accumulator_value=0.1),
}


def _build(optimizer_name, wrap):
    """Variables, a cubic loss and its train op, the optimizer plain or wrapped by ``wrap``."""
    tf1.set_random_seed(3)
    weights = [tf1.get_variable(f"w{i}", shape, initializer=tf1.random_normal_initializer(), use_resource=True)
               for i, shape in enumerate(SHAPES)]
    loss = tf.add_n([tf.reduce_sum(w * w * w) for w in weights])
    optimizer = OPTIMIZERS[optimizer_name]()
    return weights, (wrap(optimizer) if wrap else optimizer).minimize(loss)


def _states(optimizer_name, wrap, steps=3):
    """{name: (dtype, value)} of every global variable after initialisation, then after each of ``steps`` steps."""
    with tf.Graph().as_default(), tf1.Session() as session:
        _, train_op = _build(optimizer_name, wrap)
        session.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
        states = []
        for step in range(steps + 1):
            if step:
                session.run(train_op)
            variables = tf1.global_variables()
            values = session.run(variables)
            states.append({v.op.name: (v.dtype.base_dtype, value) for v, value in zip(variables, values)})
        return states


WRAPS = {
    "bfloat16 default": lambda opt: LossScaleOptimizer(opt, NoLossScaling()),
    "fixed scale 128": lambda opt: LossScaleOptimizer(opt, FixedLossScaleManager(128),
                                                      max_consecutive_skips_at_min=None),
}


@pytest.mark.parametrize("wrap_name", list(WRAPS))
@pytest.mark.parametrize("optimizer_name", list(OPTIMIZERS))
def test_wrapped_slots_start_and_step_bit_for_bit_as_the_unwrapped_optimizer(optimizer_name, wrap_name):
    reference = _states(optimizer_name, None)
    wrapped = _states(optimizer_name, WRAPS[wrap_name])
    for step, (expected, actual) in enumerate(zip(reference, wrapped)):
        # Same names and dtypes (checkpoints unchanged); the wrapper may add its own counters.
        assert set(expected) <= set(actual)
        for name, (dtype, value) in expected.items():
            assert actual[name][0] == dtype, name
            # 128 is a power of two: scaling is exact, so bit-for-bit equality holds for it too.
            np.testing.assert_array_equal(actual[name][1].view(np.uint32), value.view(np.uint32),
                                          err_msg=f"{name} after step {step}")


@pytest.mark.executed_ops
@pytest.mark.parametrize("wrap_name", list(WRAPS))
def test_first_update_keeps_no_copy_of_the_slots(wrap_name):
    slot_set = sum(4 * rows * columns for rows, columns in SHAPES)
    with tf.Graph().as_default():
        plain_first, plain_second = live_bytes_per_step(_build("momentum", None)[1])
    # The mechanism: the plain optimizer's first update copies every slot off the folded constant,
    # which the session keeps.
    assert plain_first - plain_second >= slot_set
    with tf.Graph().as_default():
        first, second = live_bytes_per_step(_build("momentum", WRAPS[wrap_name])[1])
    assert first - second < slot_set // 2
