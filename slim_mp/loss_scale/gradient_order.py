"""Gradient terms computed from a variable alone (weight decay) run just before the sum that needs them.

A regularized weight's gradient is an ``AddN`` of the back-propagated term and the regularizer's
term (``.../Regularizer/l2_regularizer/L2Loss_grad/mul``: the weight times the loss's scalar
gradient). That term needs nothing but the weight and scalars, so TensorFlow's executor computes it
as soon as the backward pass starts and holds it, float32 and as large as the weight, until the
back-propagated term of the same weight arrives, which for the first layers is the end of the
step: at the step's memory peak every regularized weight's term is alive at once (about 90 MiB for
ResNet-50). ``defer_variable_terms`` gives each such term control dependencies on the ops making
the other inputs of its sum, so it is computed right before it is added and dies right after.
Only the order changes: every gradient's value is the same.
"""

from typing import List, Optional, Sequence, Set, Tuple

import tensorflow as tf

from slim_mp.loss_scale.finite_check import Gradient

# Ops whose outputs exist before the step computes anything: the variables, their reads, constants.
_STEP_START_OP_TYPES = frozenset({"VarHandleOp", "VariableV2", "Variable", "ReadVariableOp", "Const"})
# Ops a gradient may pass through between its sum and the variable (tf.gradients' gating, reads).
_PASS_THROUGH_OP_TYPES = frozenset({"Identity"})
_SUM_OP_TYPES = frozenset({"AddN"})
# How many ops back a term may be from the variable (the L2 term is one Mul on the variable's read).
_MAX_TERM_DEPTH = 4


def _is_scalar(tensor: tf.Tensor) -> bool:
    """True when ``tensor`` is known to hold at most one element (a loss's gradient, a decay factor)."""
    elements = tensor.shape.num_elements()
    return elements is not None and elements <= 1


def _from_variables_and_scalars(tensor: tf.Tensor, depth: int = 0) -> bool:
    """True when ``tensor`` is computed from variables, constants and scalars only, within a few ops."""
    op = tensor.op
    if op.type in _STEP_START_OP_TYPES:
        return True
    if depth >= _MAX_TERM_DEPTH or not op.inputs or op.control_inputs:
        return False
    large = [t for t in op.inputs if not _is_scalar(t)]
    return bool(large) and all(_from_variables_and_scalars(t, depth + 1) for t in large)


def _sum_of(gradient: tf.Tensor) -> Optional[tf.Operation]:
    """The ``AddN`` that makes ``gradient``, looking through the identities tf.gradients adds; else None."""
    op = gradient.op
    while op.type in _PASS_THROUGH_OP_TYPES and len(op.inputs) == 1:
        op = op.inputs[0].op
    return op if op.type in _SUM_OP_TYPES else None


def _feeds_only(op: tf.Operation, consumer: tf.Operation) -> bool:
    """True when every output of ``op`` goes to ``consumer`` alone and nothing waits on ``op``."""
    return not op._control_outputs and all(
        all(reader is consumer for reader in output.consumers()) for output in op.outputs)


def _deferrable_terms(total: tf.Operation) -> Tuple[List[tf.Operation], List[tf.Operation]]:
    """The ops of ``total``'s variable-only terms that can wait, and the ops making its other terms."""
    early, late = [], []
    for term in total.inputs:
        if _from_variables_and_scalars(term) and term.op.type not in _STEP_START_OP_TYPES \
                and _feeds_only(term.op, total):
            early.append(term.op)
        else:
            late.append(term.op)
    return early, late


def defer_variable_terms(gradients: Sequence[Optional[Gradient]]) -> int:
    """Make every variable-only term of each gradient's sum wait for the sum's other terms.

    Args:
      gradients: the gradients ``compute_gradients`` returned, before anything consumes them; None
        and ``IndexedSlices`` (no sum of dense terms) are left alone.

    Returns:
      How many terms were deferred (0 for a loss without regularizers).
    """
    deferred: Set[tf.Operation] = set()
    for gradient in gradients:
        if not isinstance(gradient, tf.Tensor):
            continue
        total = _sum_of(gradient)
        if total is None:
            continue
        early, late = _deferrable_terms(total)
        if not late:
            continue
        for op in early:
            if op not in deferred:
                # Safe from cycles: ``op`` feeds only ``total``, so no op of ``late`` can depend on it.
                op._add_control_inputs([other for other in late if other not in op.control_inputs])
                deferred.add(op)
    return len(deferred)
