"""``debug_nonfinite`` in a loop without a seam: one warning naming the seams; without it, no Python in the step."""

import tensorflow as tf

import tiny_model
from tiny_model import UNWATCHED

tf1 = tf.compat.v1


def test_debug_nonfinite_without_a_seam_warns_once_naming_the_seams(logged):
    with tf.Graph().as_default():
        train_op, _ = tiny_model.build(learning_rate=0.01, loss_scale=128.0)
        with tf1.Session() as session:
            session.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            for _ in range(3):
                session.run(train_op)
    (warning,) = [line for line in logged if UNWATCHED in line]
    assert "train_step_fn=slim_mp.train_step" in warning and "slim_mp.TrainStepHook" in warning


def test_without_debug_nonfinite_the_train_step_runs_no_python():
    with tf.Graph().as_default():
        tiny_model.build(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
        kinds = {op.type for op in tf1.get_default_graph().get_operations()}
    assert not kinds & {"PyFunc", "PyFuncStateless", "EagerPyFunc"}
