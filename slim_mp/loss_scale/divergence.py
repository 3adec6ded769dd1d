"""The checks that stop a diverged run, and their errors read back as ``TrainingDivergedError``.

A check that fires inside the graph (``tf.debugging.check_numerics``, ``tf.debugging.Assert``)
reaches Python only as an ``InvalidArgumentError`` carrying a message, so at that boundary the
messages are the contract. They are all written and read here, nowhere else:

- the loss check (``loss_check``): the train step's loss is inf or NaN; tf_slim's own loss check
  (``create_train_op(..., check_numerics=True)``, its default) reads back as the same check, and so
  does a loop that finds the loss it fetched not finite (``NONFINITE_LOSS``);
- the loss-scale guard (``GUARD_SENTENCE_START`` ... ``GUARD_SENTENCE_END``, built by
  ``skip_monitor.divergence_guard``): the steps skipped in a row at the minimum scale;
- the symptom (``NONFINITE_SUMMARY``): TensorBoard's histogram summary of a tensor holding inf or NaN
  fails with TensorFlow's own message, often before either check (the official scripts summarise
  every activation);
- the diagnosis (``with_diagnosis``) that ``debug_nonfinite=True`` adds to any of them: where the
  first inf/NaN came from.

``read_divergence`` turns such an error into a ``Divergence``; a training loop raises it as a
``TrainingDivergedError`` with the step and the loss scale. It is an ``ArgumentError``: its sentence
names what the user can change (``LEARNING_RATE``, ``DEBUG_NONFINITE``) as the library's arguments,
and a script's ``error:`` line as its flags.
"""

import dataclasses
import re
from typing import Optional

import tensorflow as tf

from slim_mp.config_fields import ArgumentError, argument

LOSS_CHECK = "loss check"
LOSS_SCALE_GUARD = "loss-scale guard"
NONFINITE_SUMMARY = "non-finite summary"
LOSS_CHECK_MESSAGE = "The loss is inf or NaN"
GUARD_SENTENCE_START = "Training diverged"
GUARD_SENTENCE_END = "Run these layers in bfloat16, or add the ops that feed them to the float16 deny list."
# Between ``with_diagnosis`` and ``read_divergence`` only: the user reads ``DEBUG_NONFINITE``.
_DIAGNOSIS_MARK = "Diagnosis (debug_nonfinite=True): "
# The message of the check_numerics that tf_slim's create_train_op puts on the total loss.
SLIM_LOSS_CHECK_MESSAGE = "LossTensor is inf or nan"
# TensorFlow's histogram summary of a tensor holding inf or NaN ("Infinity in summary histogram for: tag").
_SUMMARY_MESSAGE = re.compile(r"\b(Infinity|Nan) in (?:summary )?[Hh]istogram for: (\S+)")


# What a divergence sentence tells the user to change, as a library caller reads it (a script: its flags).
LEARNING_RATE = argument("learning_rate", reads="the optimizer's learning rate")
DEBUG_NONFINITE = argument("debug_nonfinite", reads="debug_nonfinite=True")


@dataclasses.dataclass(frozen=True)
class Divergence:
    """Which check fired, what it said (the guard's sentence, the summarised tag), and the diagnosis if one was added.

    ``detail`` is the guard's whole sentence, or for a failed summary the tag and what it held; the
    loss check says nothing more than that it fired.
    """

    check: str
    detail: Optional[str] = None
    diagnosis: Optional[str] = None

    def sentence(self) -> str:
        """The check's sentence, what the user can change marked as arguments (``slim_mp.config_fields.argument``:
        ``str(ArgumentText(sentence))`` reads it as a library caller does)."""
        if self.check == LOSS_CHECK:
            return f"{LOSS_CHECK_MESSAGE}; lower {LEARNING_RATE} or check the input data"
        if self.check == NONFINITE_SUMMARY:
            return (f"Training diverged: {self.detail}, so its TensorBoard histogram summary failed; lower "
                    f"{LEARNING_RATE} or check the input data")
        return self.detail


NONFINITE_LOSS = Divergence(LOSS_CHECK)


class TrainingDivergedError(ArgumentError):
    """The loss or the gradients became inf/NaN for good; the message says at which step and loss scale.

    Attributes:
      divergence: the check that fired, its sentence and the ``debug_nonfinite`` diagnosis.
      step: the step that failed (1-based: the step the run was taking).
      loss_scale: the loss scale then, or None without loss scaling.
    """

    def __init__(self, divergence: Divergence, step: int, loss_scale: Optional[float]) -> None:
        self.divergence = divergence
        self.step = step
        self.loss_scale = loss_scale
        where = f"at step {step}"
        if loss_scale is not None and divergence.diagnosis is None:  # a diagnosis names the scale the step ran with
            where += f" with loss scale {loss_scale:g}"
        explained = "" if divergence.diagnosis is None else f" Diagnosis ({DEBUG_NONFINITE}): {divergence.diagnosis}."
        super().__init__(f"{divergence.sentence().rstrip(' .')} ({where}).{explained}")


def loss_check(loss: tf.Tensor) -> tf.Tensor:
    """``loss``, failing the step with the loss check's message when it is inf or NaN."""
    return tf.debugging.check_numerics(loss, LOSS_CHECK_MESSAGE)


def with_diagnosis(error: tf.errors.OpError, diagnosis: str) -> tf.errors.OpError:
    """``error`` (same type, node and op) with ``diagnosis``, the origin of its inf/NaN, added to the message."""
    return type(error)(error.node_def, error.op, f"{error.message} {_DIAGNOSIS_MARK}{diagnosis.rstrip('.')}.")


def read_divergence(error: tf.errors.OpError) -> Optional[Divergence]:
    """The divergence check that raised ``error``, or None when ``error`` came from anything else."""
    message = error.message
    summary = _SUMMARY_MESSAGE.search(message)
    if LOSS_CHECK_MESSAGE in message or SLIM_LOSS_CHECK_MESSAGE in message:
        check, detail = LOSS_CHECK, None
    elif GUARD_SENTENCE_START in message and GUARD_SENTENCE_END in message:
        start = message.index(GUARD_SENTENCE_START)
        end = message.index(GUARD_SENTENCE_END, start) + len(GUARD_SENTENCE_END)
        check, detail = LOSS_SCALE_GUARD, message[start:end]
    elif summary is not None:
        held = "inf" if summary.group(1) == "Infinity" else "NaN"
        check, detail = NONFINITE_SUMMARY, f"{summary.group(2)!r} holds {held}"
    else:
        return None
    diagnosis = None
    if _DIAGNOSIS_MARK in message:
        after = message[message.index(_DIAGNOSIS_MARK) + len(_DIAGNOSIS_MARK):]
        diagnosis = after.split("\n", 1)[0].rstrip(".")
    return Divergence(check, detail, diagnosis)
