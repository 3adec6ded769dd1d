"""The divergence checks' real TensorFlow errors read back as structured ``Divergence`` values."""

import pytest
import tensorflow as tf

from slim_mp.config_fields import ArgumentError, ArgumentText, command_line_message
from slim_mp.loss_scale.divergence import (LOSS_CHECK, LOSS_SCALE_GUARD, NONFINITE_SUMMARY, TrainingDivergedError,
                                           loss_check, read_divergence, with_diagnosis)
from slim_mp.loss_scale.skip_monitor import divergence_guard
from slim_mp.training.precision_flags import FLAG_NAMES

tf1 = tf.compat.v1
LOSS_SENTENCE = "The loss is inf or NaN; lower the optimizer's learning rate or check the input data"
DIAGNOSIS = "the first non-finite value came from op 'net/conv1/Conv2D_fp16' (forward pass), at loss scale 8"


def _error_of(build) -> tf.errors.InvalidArgumentError:
    """Run the op ``build()`` makes in a fresh graph; return the InvalidArgumentError it raises."""
    with tf.Graph().as_default():
        op = build()
        with tf1.Session() as session, pytest.raises(tf.errors.InvalidArgumentError) as raised:
            session.run(op)
    return raised.value


def _failed_loss_check():
    return _error_of(lambda: loss_check(tf.constant(float("inf"))))


def _failed_guard():
    def build():
        weights = [tf1.Variable(1.0, name=name) for name in ("conv1/weights", "fc/weights")]
        gradients = [(tf.constant(float("nan")), weights[0]), (tf.constant(1.0), weights[1])]
        return divergence_guard(tf.constant(3), 3, gradients, tf.constant([False, True]), tf.constant(1.0))
    return _error_of(build)


def test_a_failed_loss_check_reads_as_the_loss_check():
    divergence = read_divergence(_failed_loss_check())
    assert (divergence.check, str(ArgumentText(divergence.sentence())), divergence.diagnosis) == (
        LOSS_CHECK, LOSS_SENTENCE, None)
    error = TrainingDivergedError(divergence, 12, 128.0)
    assert str(error) == f"{LOSS_SENTENCE} (at step 12 with loss scale 128)."
    assert (error.step, error.loss_scale) == (12, 128.0) and isinstance(error, ArgumentError)
    assert error.arguments == ("learning_rate",)


def test_a_script_names_its_flags_where_the_library_names_its_arguments():
    error = TrainingDivergedError(with_diagnosis_read(_failed_loss_check()), 3, None)
    assert str(error) == (f"{LOSS_SENTENCE} (at step 3). Diagnosis (debug_nonfinite=True): {DIAGNOSIS}.")
    assert command_line_message(error, FLAG_NAMES) == (
        "The loss is inf or NaN; lower --learning_rate or check the input data (at step 3). "
        f"Diagnosis (--mp_debug_nonfinite): {DIAGNOSIS}.")


def test_the_loss_scale_guard_reads_as_the_guard_with_its_whole_sentence():
    divergence = read_divergence(_failed_guard())
    assert divergence.check == LOSS_SCALE_GUARD and divergence.diagnosis is None
    assert str(ArgumentText(divergence.sentence())) == (
        "Training diverged: 3 steps in a row were skipped with the loss scale at its minimum (1), because the "
        "gradients of 1 variable(s) hold inf or NaN even unscaled, first: conv1/weights. Run these layers in "
        "bfloat16, or add the ops that feed them to the float16 deny list.")
    assert str(TrainingDivergedError(divergence, 40, 1.0)).endswith("deny list (at step 40 with loss scale 1).")


@pytest.mark.parametrize("failure, check", [(_failed_loss_check, LOSS_CHECK), (_failed_guard, LOSS_SCALE_GUARD)])
def test_a_diagnosis_added_to_either_check_is_read_back_and_ends_the_message(failure, check):
    original = failure()
    diagnosed = with_diagnosis(original, DIAGNOSIS + ".")
    assert type(diagnosed) is type(original) and diagnosed.op is original.op
    divergence = read_divergence(diagnosed)
    assert (divergence.check, divergence.diagnosis) == (check, DIAGNOSIS)
    message = str(TrainingDivergedError(divergence, 5, 8.0))
    # The diagnosis names the loss scale the step ran with; the message does not repeat it.
    assert message.endswith(f" (at step 5). Diagnosis (debug_nonfinite=True): {DIAGNOSIS}."), message


def with_diagnosis_read(error: tf.errors.InvalidArgumentError):
    """The ``Divergence`` read back from ``error`` with ``DIAGNOSIS`` added."""
    return read_divergence(with_diagnosis(error, DIAGNOSIS))


@pytest.mark.parametrize("value, held", [(float("inf"), "inf"), (float("nan"), "NaN")])
def test_tensorboards_histogram_of_a_nonfinite_tensor_reads_as_divergence_naming_the_tag(value, held):
    error = _error_of(lambda: tf1.summary.histogram("activations/pool1", tf.constant([1.0, value])))
    divergence = read_divergence(error)
    assert divergence.check == NONFINITE_SUMMARY
    assert str(TrainingDivergedError(divergence, 7, None)) == (
        f"Training diverged: 'activations/pool1' holds {held}, so its TensorBoard histogram summary failed; lower "
        "the optimizer's learning rate or check the input data (at step 7).")


def test_other_failures_are_not_divergence():
    unrelated = [
        _error_of(lambda: tf.debugging.check_numerics(tf.constant(float("nan")), "the images hold NaN")),
        _error_of(lambda: tf.debugging.Assert(tf1.placeholder_with_default(False, []), ["Training diverged? no"])),
    ]
    for error in unrelated:
        assert read_divergence(error) is None, error.message
