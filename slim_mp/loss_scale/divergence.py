"""The in-graph checks that stop a diverged run, and their errors read back as ``TrainingDivergedError``.

A check that fires inside the graph (``tf.debugging.check_numerics``, ``tf.debugging.Assert``)
reaches Python only as an ``InvalidArgumentError`` carrying a message, so at that boundary the
sentences are the contract. They are all written and read here, nowhere else:

- the loss check (``loss_check``): the train step's loss is inf or NaN; tf_slim's own loss check
  (``create_train_op(..., check_numerics=True)``, its default) reads back as the same check;
- the loss-scale guard (``GUARD_SENTENCE_START`` ... ``GUARD_SENTENCE_END``, built by
  ``skip_monitor.divergence_guard``): the steps skipped in a row at the minimum scale;
- the diagnosis (``with_diagnosis``) that ``--mp_debug_nonfinite`` adds to either: where the first
  inf/NaN came from.

``read_divergence`` turns such an error into a ``Divergence``; the training loop raises it as a
``TrainingDivergedError`` with the step and the loss scale.
"""

import dataclasses
from typing import Optional

import tensorflow as tf

LOSS_CHECK = "loss check"
LOSS_SCALE_GUARD = "loss-scale guard"
LOSS_CHECK_SENTENCE = "The loss is inf or NaN; lower --learning_rate or check the input data"
GUARD_SENTENCE_START = "Training diverged"
GUARD_SENTENCE_END = "Run these layers in bfloat16, or add the ops that feed them to the float16 deny list."
DIAGNOSIS_START = "Diagnosis (--mp_debug_nonfinite): "
# The message of the check_numerics that tf_slim's create_train_op puts on the total loss.
SLIM_LOSS_CHECK_MESSAGE = "LossTensor is inf or nan"


@dataclasses.dataclass(frozen=True)
class Divergence:
    """Which check fired (``LOSS_CHECK`` or ``LOSS_SCALE_GUARD``), its sentence, and the diagnosis if one was added."""

    check: str
    sentence: str
    diagnosis: Optional[str] = None


class TrainingDivergedError(ValueError):
    """The loss or the gradients became inf/NaN for good; the message says at which step and loss scale.

    Attributes:
      divergence: the check that fired, its sentence and the ``--mp_debug_nonfinite`` diagnosis.
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
        explained = f" {DIAGNOSIS_START}{divergence.diagnosis}." if divergence.diagnosis is not None else ""
        super().__init__(f"{divergence.sentence.rstrip(' .')} ({where}).{explained}")


def loss_check(loss: tf.Tensor) -> tf.Tensor:
    """``loss``, failing the step with the loss check's sentence when it is inf or NaN."""
    return tf.debugging.check_numerics(loss, LOSS_CHECK_SENTENCE)


def with_diagnosis(error: tf.errors.OpError, diagnosis: str) -> tf.errors.OpError:
    """``error`` (same type, node and op) with ``diagnosis``, the origin of its inf/NaN, added to the message."""
    return type(error)(error.node_def, error.op, f"{error.message} {DIAGNOSIS_START}{diagnosis.rstrip('.')}.")


def read_divergence(error: tf.errors.OpError) -> Optional[Divergence]:
    """The divergence check that raised ``error``, or None when ``error`` came from anything else."""
    message = error.message
    if LOSS_CHECK_SENTENCE in message or SLIM_LOSS_CHECK_MESSAGE in message:
        check, sentence = LOSS_CHECK, LOSS_CHECK_SENTENCE
    elif GUARD_SENTENCE_START in message and GUARD_SENTENCE_END in message:
        start = message.index(GUARD_SENTENCE_START)
        end = message.index(GUARD_SENTENCE_END, start) + len(GUARD_SENTENCE_END)
        check, sentence = LOSS_SCALE_GUARD, message[start:end]
    else:
        return None
    diagnosis = None
    if DIAGNOSIS_START in message:
        after = message[message.index(DIAGNOSIS_START) + len(DIAGNOSIS_START):]
        diagnosis = after.split("\n", 1)[0].rstrip(".")
    return Divergence(check, sentence, diagnosis)
