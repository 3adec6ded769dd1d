"""The live part of a rewritten graph, for TensorBoard's graph view and the checkpoints' ``.meta`` files.

The mixed-precision pass re-creates each converted op as ``<name>_bf16``/``<name>_fp16`` and
re-routes its consumers, so the float32 original stays in the ``tf.Graph`` with nothing reading
it. Written as is, TensorBoard would draw every converted op twice and the ``.meta`` would carry a
dead float32 copy of the network. ``live_graph_def`` leaves out the originals the pass replaced
and the nodes only they read; every other node, including every op nothing consumes (train op,
initializers, savers, summaries, readiness checks), is kept with all it reads, so the ``.meta``
imports, restores and trains on.
"""

from typing import Iterable, Optional, Sequence

import tensorflow as tf

from slim_mp.graph_pass import RewriteReport

tf1 = tf.compat.v1


def live_graph_def(graph: tf.Graph, reports: Sequence[RewriteReport]) -> tf1.GraphDef:
    """Return ``graph``'s GraphDef (with shapes) without the ops ``reports`` replaced and what only they read.

    Args:
      graph: a graph rewritten by the passes of ``reports`` (or by none: then the whole graph).
      reports: the ``RewriteReport`` of every ``slim_mp.rewrite`` run on ``graph``.

    Returns:
      A GraphDef holding every node some kept op reaches through data or control inputs.
    """
    operations = graph.get_operations()
    replaced = {op.name for op in operations if any(report.remap(op) is not op for report in reports)}
    consumed = {tensor.op.name for op in operations for tensor in op.inputs}
    consumed.update(control.name for op in operations for control in op.control_inputs)
    sinks = [op.name for op in operations if op.name not in consumed and op.name not in replaced]
    return reachable_graph_def(graph.as_graph_def(add_shapes=True), sinks)


def _node_name(input_name: str) -> str:
    """The node an input string of a NodeDef names: ``^ctrl`` (control), ``name:1`` (output 1) or ``name``."""
    return input_name.lstrip("^").split(":")[0]


def reachable_graph_def(graph_def: tf1.GraphDef, sinks: Iterable[str]) -> tf1.GraphDef:
    """The nodes of ``graph_def`` that ``sinks`` reach through data and control inputs, in their order.

    What ``tf.compat.v1.graph_util.extract_sub_graph`` returns (the function library and versions
    kept), without its deprecation warning on the user's screen.

    Raises:
      KeyError: a sink or an input names a node ``graph_def`` does not hold.
    """
    nodes = {node.name: node for node in graph_def.node}
    kept, pending = set(), list(sinks)
    while pending:
        name = pending.pop()
        if name not in kept:
            kept.add(name)
            pending.extend(_node_name(input_name) for input_name in nodes[name].input)
    reached = tf1.GraphDef()
    reached.versions.CopyFrom(graph_def.versions)
    reached.library.CopyFrom(graph_def.library)
    reached.node.extend(node for node in graph_def.node if node.name in kept)
    return reached


class LiveGraphSaver(tf1.train.Saver):
    """A ``Saver`` over the save/restore ops of ``saver`` whose checkpoints' ``.meta`` holds ``graph_def``.

    It adds no op to the graph (it reuses ``saver``'s ``SaverDef``); the collections written are
    the graph's, as ``tf.compat.v1.train.Saver`` writes them.
    """

    def __init__(self, saver: tf1.train.Saver, graph: tf.Graph, graph_def: tf1.GraphDef) -> None:
        super().__init__(saver_def=saver.saver_def, max_to_keep=None)
        self._graph = graph
        self._live_graph_def = graph_def

    def export_meta_graph(self, filename: Optional[str] = None, collection_list=None, as_text: bool = False,
                          export_scope: Optional[str] = None, clear_devices: bool = False,
                          clear_extraneous_savers: bool = False, strip_default_attrs: bool = False,
                          save_debug_info: bool = False) -> tf1.MetaGraphDef:
        """Write the ``.meta`` of the live graph (``Saver.save`` calls this with ``write_meta_graph=True``)."""
        return tf1.train.export_meta_graph(
            filename=filename, graph_def=self._live_graph_def, saver_def=self.saver_def,
            collection_list=collection_list, as_text=as_text, graph=self._graph, export_scope=export_scope,
            clear_devices=clear_devices, clear_extraneous_savers=clear_extraneous_savers,
            strip_default_attrs=strip_default_attrs, save_debug_info=save_debug_info,
        )
