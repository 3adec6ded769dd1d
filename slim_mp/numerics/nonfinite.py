"""Where the first inf/NaN of a skipped step came from: re-run its batch with an is-finite flag per tensor.

A ``NonfiniteProbe`` is built once, next to the gradients, and adds one fetch (a bool vector, one
flag per float tensor of the forward and backward pass) that the train step never runs. After a
step is skipped (or its loss check fails), the loop feeds that step's batch and loss scale (the
``captured`` tensors) back in and fetches the flags; the first tensor in execution (topological)
order that is not finite names the op where inf/NaN first appeared. The batch itself is checked
first: inf/NaN already in the input (``NonfiniteInput``) is the data's, not the first op's that
reads it.

Every probe is registered with its graph (``graph_probes``), so a training loop that has only the
session finds them. A loop that runs them says so (``watch_probes``); ``unwatched_probes_warning``
is the op a train step runs to warn once when the probes were built but nothing watches them.
"""

import dataclasses
import weakref
from typing import Dict, List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf
from absl import logging

from slim_mp.graph_pass import select_region
from slim_mp.precision import LOW_PRECISIONS

# Ops that hand out a new batch on every run: their outputs are captured and fed back.
DATA_SOURCE_OP_TYPES = frozenset({
    "IteratorGetNext", "IteratorGetNextSync", "QueueDequeueV2", "QueueDequeueManyV2", "QueueDequeueUpToV2",
})


# The seams that run the probes, named in the warning for a loop that runs none of them.
WATCHING_SEAMS = ("train_step_fn=slim_mp.train_step in slim.learning.train(...), "
                  "hooks=[slim_mp.TrainStepHook(...)] in MonitoredTrainingSession(...), "
                  "or slim_mp.train_step(sess, train_op, global_step, {}) as the step of a plain Session loop")

_PROBES_BY_GRAPH: "weakref.WeakKeyDictionary[tf.Graph, List[NonfiniteProbe]]" = weakref.WeakKeyDictionary()
_WATCHED_GRAPHS: "weakref.WeakSet[tf.Graph]" = weakref.WeakSet()
_WARNED_GRAPHS: "weakref.WeakSet[tf.Graph]" = weakref.WeakSet()


@dataclasses.dataclass(frozen=True)
class NonfiniteOrigin:
    """The first op whose output held inf or NaN, which pass it belongs to, its dtype, and the loss scale then."""

    op_name: str
    op_type: str
    backward: bool
    dtype: str
    loss_scale: Optional[float]

    @property
    def low_precision(self) -> bool:
        """True when the op ran in float16 or bfloat16."""
        return self.dtype in {d.name for d in LOW_PRECISIONS}

    def describe(self) -> str:
        """One sentence for a log line or an error message."""
        precision = f"low precision ({self.dtype})" if self.low_precision else self.dtype
        scale = "" if self.loss_scale is None else f" at loss scale {self.loss_scale:g}"
        return (f"the first non-finite value came from op {self.op_name!r} ({self.op_type}, "
                f"{'backward' if self.backward else 'forward'} pass, {precision}){scale}")


@dataclasses.dataclass(frozen=True)
class NonfiniteInput:
    """The step's input batch already held inf or NaN: which tensor of the batch, and whether features or labels."""

    tensor_name: str
    kind: str  # "NaN", "inf" or "NaN and inf"
    role: str  # "features" (a batch of rank 2 or more) or "labels"

    def describe(self) -> str:
        """One sentence for a log line or an error message."""
        return f"the input batch already held {self.kind} ({self.role}, {self.tensor_name!r})"


# What a diagnosis finds: the batch's own inf/NaN, or the op that made the first one.
Nonfinite = Union[NonfiniteInput, NonfiniteOrigin]


def _nonfinite_input(sources: Sequence[tf.Tensor], feed_dict: Dict) -> Optional[NonfiniteInput]:
    """The first float tensor of the fed batch (``sources``) holding inf or NaN, or None."""
    for tensor in sources:
        value = feed_dict.get(tensor)
        if value is None or not tensor.dtype.is_floating:
            continue
        nan, inf = bool(np.isnan(value).any()), bool(np.isinf(value).any())
        if nan or inf:
            kind = " and ".join(name for name, present in (("NaN", nan), ("inf", inf)) if present)
            return NonfiniteInput(tensor.name, kind, "features" if np.ndim(value) >= 2 else "labels")
    return None


def _state_reads(graph: tf.Graph, ops: Sequence[tf.Operation]) -> List[tf.Tensor]:
    """Reads of non-trainable variables (batch-norm moving statistics, the loss scale): a skipped step
    still updates them, so the replay feeds the values the failing step read."""
    trainable = {v.handle.op for v in graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
                 if hasattr(v, "handle")}
    return [op.outputs[0] for op in ops
            if op.type == "ReadVariableOp" and op.inputs[0].op.type == "VarHandleOp"
            and op.inputs[0].op not in trainable]


def _checkable(tensor: tf.Tensor) -> bool:
    """A float tensor outside TF1 control flow that can hold values (statically empty outputs, such as
    batch norm's gradient reserve space, are scalars at run time on a CPU and hold nothing to check)."""
    return (tensor.dtype.base_dtype.is_floating and tensor.op._get_control_flow_context() is None
            and tensor.shape.num_elements() != 0)


class NonfiniteProbe:
    """Is-finite flags of every float tensor that computes ``gradients``, evaluated only on request.

    Args:
      loss: the (rewritten) loss; ops it depends on form the forward pass, the others the backward.
      gradients: the gradient tensors the step checks for inf/NaN.
      loss_scale: the loss-scale tensor the gradients were scaled by (captured and fed back, so the
        re-run sees the scale of the failing step, not the one the skip lowered it to).

    ``captured``: what the replay feeds back — the batch (outputs of input-pipeline ops), the reads of
    non-trainable variables (batch-norm moving statistics and the loss scale, which a skipped step
    still updates) and ``loss_scale``. Trainable variables are unchanged by a skipped step.
    """

    def __init__(self, loss: tf.Tensor, gradients: Sequence[tf.Tensor], loss_scale: Optional[tf.Tensor] = None
                 ) -> None:
        region = select_region(list(gradients))
        forward = set(select_region(loss).ops)
        sources = [t for op in region.ops if op.type in DATA_SOURCE_OP_TYPES for t in op.outputs]
        state = _state_reads(region.graph, region.ops)
        extra = [loss_scale] if loss_scale is not None and loss_scale.ref() not in {t.ref() for t in state} else []
        self.captured: List[tf.Tensor] = sources + state + extra
        self._sources = sources
        self._loss_scale = loss_scale
        fed = {t.ref() for t in self.captured}
        self._tensors = [t for op in region.ops for t in op.outputs if _checkable(t) and t.ref() not in fed]
        self._backward = [t.op not in forward for t in self._tensors]
        with region.graph.as_default(), tf.name_scope("nonfinite_probe"):
            self._flags = tf.stack([tf.reduce_all(tf.math.is_finite(t)) for t in self._tensors])
        _PROBES_BY_GRAPH.setdefault(region.graph, []).append(self)

    def diagnose(self, session: tf.compat.v1.Session, feed_dict: Dict) -> Optional[Nonfinite]:
        """Run the flags with ``feed_dict`` (the failing step's values of ``captured``, and any placeholders).

        Returns the input batch when it held inf/NaN already, else the first op, in execution order,
        with a non-finite output, or None if all is finite.
        """
        bad_input = _nonfinite_input(self._sources, feed_dict)
        if bad_input is not None:
            return bad_input
        fetches = {"flags": self._flags}
        if self._loss_scale is not None:
            fetches["loss_scale"] = self._loss_scale
        values = session.run(fetches, feed_dict=feed_dict)
        bad = np.flatnonzero(~values["flags"])
        if bad.size == 0:
            return None
        tensor = self._tensors[bad[0]]
        scale = float(values["loss_scale"]) if "loss_scale" in values else None
        return NonfiniteOrigin(tensor.op.name, tensor.op.type, self._backward[bad[0]],
                               tensor.dtype.base_dtype.name, scale)


def graph_probes(graph: tf.Graph) -> List[NonfiniteProbe]:
    """The probes built in ``graph``, in the order they were built (empty without ``debug_nonfinite``)."""
    return list(_PROBES_BY_GRAPH.get(graph, []))


def watch_probes(graph: tf.Graph) -> List[NonfiniteProbe]:
    """``graph_probes(graph)``, recording that a loop runs them (so ``unwatched_probes_warning`` stays silent)."""
    _WATCHED_GRAPHS.add(graph)
    return graph_probes(graph)


def _warn_if_unwatched(graph_ref: "weakref.ref[tf.Graph]") -> np.bool_:
    graph = graph_ref()
    if graph is not None and graph not in _WATCHED_GRAPHS and graph not in _WARNED_GRAPHS:
        _WARNED_GRAPHS.add(graph)
        logging.warning("debug_nonfinite=True built non-finite probes, but nothing in this training loop runs "
                        "them, so no skipped step will be diagnosed; add %s", WATCHING_SEAMS)
    return np.bool_(True)


def unwatched_probes_warning(graph: tf.Graph) -> tf.Tensor:
    """An op (in ``graph``) that, run with the train step, warns once if no loop called ``watch_probes``.

    It is a Python call per step, built only with ``debug_nonfinite``: without it steps are unchanged.
    """
    graph_ref = weakref.ref(graph)
    with graph.as_default(), tf.name_scope("nonfinite_probe"):
        return tf.numpy_function(lambda: _warn_if_unwatched(graph_ref), [], tf.bool, stateful=True,
                                 name="unwatched_warning")
