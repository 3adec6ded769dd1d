"""Select the part of a graph that computes the user's fetches (the ops the pass may rewrite), and name scopes.

``in_scopes`` is the one scope-membership rule of the package: the pass's keep-float32 scopes and
training's ``trainable_scopes`` / ``checkpoint_exclude_scopes`` all use it.
"""

import dataclasses
from typing import Any, Dict, Iterable, List

import tensorflow as tf

from slim_mp.graph_pass.op_ports import OpPorts, op_ports


@dataclasses.dataclass
class Region:
    """The ops that ``fetches`` depend on, producers before consumers."""

    graph: tf.Graph
    ops: List[tf.Operation]

    def __contains__(self, op: tf.Operation) -> bool:
        return op in self._members

    def __post_init__(self) -> None:
        self._members = set(self.ops)
        self._ports: Dict[tf.Operation, OpPorts] = {}

    def ports(self, op: tf.Operation) -> OpPorts:
        """``op_ports(op)``, computed once per region: the measured placement paints it many times."""
        if op not in self._ports:
            self._ports[op] = op_ports(op)
        return self._ports[op]


def in_scopes(name: str, scopes: Iterable[str]) -> bool:
    """True when op or variable ``name`` is one of ``scopes`` or lies under one (whole path components only).

    A scope's trailing ``/`` is ignored: ``"conv1/"`` holds ``conv1/weights`` but not ``conv10/weights``.
    """
    for scope in scopes:
        scope = scope.rstrip("/")
        if name == scope or name.startswith(scope + "/"):
            return True
    return False


def _fetch_ops(fetches: Any) -> List[tf.Operation]:
    ops = []
    for item in tf.nest.flatten(fetches, expand_composites=True):
        if isinstance(item, tf.Operation):
            ops.append(item)
        elif isinstance(item, tf.Tensor):
            ops.append(item.op)
        elif isinstance(item, tf.Variable):
            ops.append(item.op)
        else:
            raise TypeError(
                f"rewrite() fetches must be tensors or operations (or nested lists/dicts of them); "
                f"got {type(item).__name__}: {item!r}."
            )
    if not ops:
        raise ValueError("rewrite() got no fetches; pass the loss (or the tensors to compute).")
    graphs = {op.graph for op in ops}
    if len(graphs) != 1:
        raise ValueError("rewrite() fetches come from different graphs; pass tensors of one tf.Graph.")
    return ops


def select_region(fetches: Any) -> Region:
    """Walk back from ``fetches`` through data and control inputs; return the ops in topological order."""
    roots = _fetch_ops(fetches)
    order: List[tf.Operation] = []
    done = set()
    on_path = set()
    for root in roots:
        stack = [(root, False)]
        while stack:
            op, expanded = stack.pop()
            if expanded:
                on_path.discard(op)
                if op not in done:
                    done.add(op)
                    order.append(op)
                continue
            if op in done or op in on_path:
                continue
            on_path.add(op)
            stack.append((op, True))
            for dependency in list(op.control_inputs) + [t.op for t in op.inputs]:
                if dependency not in done and dependency not in on_path:
                    stack.append((dependency, False))
    return Region(graph=roots[0].graph, ops=order)
