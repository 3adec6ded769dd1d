"""Variables hash and compare as TensorFlow defines it, with the graph-mode fast path of ``compat``.

The oracle is TensorFlow's documented behaviour: in a plain graph a variable hashes by identity and
``==`` is identity; eagerly (and inside a ``tf.function``, whose outer context is eager) a variable
is unhashable and ``==`` compares element-wise. ``$SLIM_MP_FAST_VARIABLE_HASH=0`` leaves
``tf.Variable``'s methods TensorFlow's own (checked in a fresh interpreter, the only place the
import has not happened yet).
"""

import subprocess
import sys

import pytest
import tensorflow as tf
import tf_slim as slim
from tensorflow.python.framework import ops

import slim_mp  # noqa: F401  (installs the compatibility fixes)
from script_runs import script_env
from slim_mp import compat

# Run before and after ``import slim_mp`` in a fresh interpreter: are tf.Variable's methods TensorFlow's own?
OWN_METHODS_SCRIPT = """
import tensorflow as tf
own = (tf.Variable.__hash__, tf.Variable.__eq__)
import slim_mp
with tf.Graph().as_default():
    variable = tf.compat.v1.get_variable("v", [1], use_resource=True)
    assert hash(variable) == id(variable) and variable == variable
print((tf.Variable.__hash__, tf.Variable.__eq__) == own)
"""


def test_in_a_plain_graph_variables_hash_and_compare_by_identity():
    with tf.Graph().as_default():
        first = tf.compat.v1.get_variable("first", [2], use_resource=True)
        second = tf.compat.v1.get_variable("second", [2], use_resource=True)
        assert hash(first) == id(first)
        assert (first == first) is True and (first == second) is False
        assert {first, second} - {second} == {first}


def test_the_fast_path_does_not_probe_the_outer_context(monkeypatch):
    with tf.Graph().as_default():
        variable = tf.compat.v1.get_variable("weights", [3], use_resource=True)

        def probe():
            raise AssertionError("executing_eagerly_outside_functions was called")

        monkeypatch.setattr(ops, "executing_eagerly_outside_functions", probe)
        assert hash(variable) == id(variable) and variable == variable


def test_eager_variables_stay_unhashable_and_compare_element_wise():
    variable = tf.Variable([1.0, 2.0])
    with pytest.raises(TypeError, match="Variable is unhashable"):
        hash(variable)
    assert (variable == tf.constant([1.0, 3.0])).numpy().tolist() == [True, False]


def test_inside_a_function_the_original_rule_applies():
    variable = tf.Variable([1.0])

    @tf.function
    def hash_it():
        hash(variable)
        return tf.constant(0)

    with pytest.raises(TypeError, match="Variable is unhashable"):
        hash_it()


def test_a_reused_legacy_layer_adds_its_regularizer_once():
    # slim.batch_norm is a tf.compat.v1 legacy layer, which decides "new variable, add its regularizer"
    # by membership in the set of existing variables: a wrong hash or equality would add it again on reuse.
    with tf.Graph().as_default():
        inputs = tf.zeros([2, 4])
        for reuse in (None, True):
            slim.batch_norm(inputs, scale=True, param_regularizers={"gamma": tf.nn.l2_loss}, reuse=reuse, scope="bn")
        losses = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.REGULARIZATION_LOSSES)
        assert [loss.op.name for loss in losses] == ["bn/gamma/Regularizer/L2Loss"]


def test_opting_out_before_the_import_leaves_tensorflow_s_own_variable_methods():
    env = dict(script_env(), **{compat.FAST_VARIABLE_HASH_ENV: "0"})
    process = subprocess.run([sys.executable, "-c", OWN_METHODS_SCRIPT], env=env, capture_output=True, text=True,
                             timeout=120)
    assert process.returncode == 0, process.stderr[-2000:]
    assert process.stdout.split() == ["True"]


def test_a_bad_opt_out_value_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv(compat.FAST_VARIABLE_HASH_ENV, "no")
    with pytest.raises(ValueError, match=r"^\$SLIM_MP_FAST_VARIABLE_HASH='no' is neither 0 nor 1; set it to 0"):
        compat.install()
