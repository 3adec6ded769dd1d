"""Store frozen weights in the precision the rewritten graph computes in.

After the graph pass, every float32 weight a low-precision op reads goes through one ``Cast``.
Freezing turns the weight into a float32 ``Const``; folding that ``Const -> (Identity ->) Cast``
chain into one low-precision ``Const`` halves the bytes the weight takes in the file and removes
the cast from every inference. Weights that stay float32 (batch-norm statistics, float32 islands)
are left as they are.
"""

from typing import Dict, Optional

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1

_LOW_PRECISION_ENUMS = {tf.float16.as_datatype_enum, tf.bfloat16.as_datatype_enum}
_PASS_THROUGH_OPS = ("Identity",)


def _node_name(input_name: str) -> str:
    """The node an input string (``name``, ``name:1`` or ``^name``) refers to."""
    return input_name.lstrip("^").split(":")[0]


def _float32_constant_behind(name: str, nodes: Dict[str, tf1.NodeDef]) -> Optional[tf1.NodeDef]:
    """The float32 ``Const`` that ``name`` forwards unchanged through Identity nodes, or None."""
    node = nodes.get(name)
    while node is not None and node.op in _PASS_THROUGH_OPS and node.input:
        node = nodes.get(_node_name(node.input[0]))
    if node is None or node.op != "Const" or node.attr["dtype"].type != tf.float32.as_datatype_enum:
        return None
    return node


def fold_weight_casts(graph_def: tf1.GraphDef) -> tf1.GraphDef:
    """Return a copy of frozen ``graph_def`` where each low-precision cast of a float32 constant is a constant.

    The new constant keeps the cast's name, so its consumers need no change; float32 constants
    nothing else reads any more should be pruned afterwards (``slim_mp.training.reachable_graph_def``).
    """
    nodes = {node.name: node for node in graph_def.node}
    folded = tf1.GraphDef()
    folded.CopyFrom(graph_def)
    for node in folded.node:
        if node.op != "Cast" or node.attr["DstT"].type not in _LOW_PRECISION_ENUMS:
            continue
        source = _float32_constant_behind(_node_name(node.input[0]), nodes)
        if source is None:
            continue
        low_dtype = tf.dtypes.as_dtype(node.attr["DstT"].type)
        value = tf.make_ndarray(source.attr["value"].tensor).astype(np.float32).astype(low_dtype.as_numpy_dtype)
        name, device = node.name, node.device
        # The pass orders a weight's cast after the layer before (graph_pass.weight_casts); the
        # constant keeps that order, which costs nothing.
        waits_for = [input_name for input_name in node.input if input_name.startswith("^")]
        node.Clear()
        node.name, node.op, node.device = name, "Const", device
        node.input.extend(waits_for)
        node.attr["dtype"].type = low_dtype.as_datatype_enum
        node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value, dtype=low_dtype))
    return folded
