"""Grappler's bfloat16 convolution fusions, made in the form a cluster's worker accepts.

With oneDNN on, grappler's remapper fuses a bfloat16 ``Conv2D`` with its ``BiasAdd`` (and the
activation after it) into one ``_FusedConv2D`` node, although that op's definition lists no
bfloat16: oneDNN's layout pass renames the node ``_MklNativeFusedConv2D`` (whose definition does)
once the graph is partitioned. An in-process session checks nothing in between. A worker of a
cluster does: it builds the graph it receives with every node checked against its op definition
(TensorFlow's ``GraphMgr::InitItem``) before it runs that pass, and refuses the step ("Value for
attr 'T' of bfloat16 is not in the list of allowed values: half, float, double, ...").

``form_worker_fusions`` makes each such fusion in the graph itself, under oneDNN's name, before a
session starts. The kernel, its inputs and so its numbers are those a single process runs; the
remapper stays on for every other fusion (batch norm + activation, matmul + bias, depthwise + bias,
whose op definitions accept bfloat16), so a cluster step runs the single process's fused kernels.

What is fused: from each such convolution, its bias add (``graph_pass.fuses_into``), then the
activation the remapper would add to them (its only consumer, no control edge in the way). The
convolution and its bias add are fused even where the remapper would not (another consumer of the
convolution, a control edge): a pair left in the graph could still become the refused node.
The fused op takes over every consumer of the chain's last op and every op waiting for one of the
chain's ops; the old chain stays in the graph, unused, and waits (control edge) for the fused op,
which keeps the remapper away from it should an op built later read it.

Leaves alone: graphs without oneDNN (the remapper then fuses no bfloat16 convolution), every
precision ``_FusedConv2D`` accepts (float32, float16), convolutions placed on a GPU, and every other
fused op. Call it once the graph is complete (the fused op has no gradient) and before its session
starts.
"""

import dataclasses
from typing import Dict, List, Optional, Tuple

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.framework import kernels, op_def_registry

from slim_mp.devices import device_type, onednn_enabled
from slim_mp.graph_pass import fuses_into, op_def_allows
from slim_mp.op_families import ONEDNN_PREFIXES

# The node grappler's remapper makes, and the name oneDNN's layout pass gives it in a plain layout.
GRAPPLER_FUSED_CONV = "_FusedConv2D"
ONEDNN_FUSED_CONV = f"{ONEDNN_PREFIXES[0]}{GRAPPLER_FUSED_CONV[1:]}"


@dataclasses.dataclass(frozen=True)
class WorkerFusion:
    """One chain fused for the workers: its ops (convolution first), what joined the convolution, the new op."""

    ops: Tuple[str, ...]
    fused_ops: Tuple[str, ...]
    fused_name: str

    def describe(self) -> str:
        """E.g. ``conv1/Conv2D_bf16 + BiasAdd + Relu -> conv1/Relu_bf16_fused``."""
        return f"{' + '.join((self.ops[0],) + self.fused_ops)} -> {self.fused_name}"


def _onednn_kernel_label(dtype: tf.DType) -> Optional[str]:
    """The label of oneDNN's CPU kernel of the fused convolution in ``dtype`` (None: no such kernel here)."""
    for kernel in kernels.get_registered_kernels_for_op(ONEDNN_FUSED_CONV).kernel:
        types = [c.allowed_values.list.type for c in kernel.constraint if c.name == "T"]
        if kernel.device_type == "CPU" and types and dtype.as_datatype_enum in types[0]:
            return kernel.label
    return None


def _refused_on_workers(conv: tf.Operation) -> bool:
    """Whether a worker would refuse the fused node grappler makes of ``conv`` under oneDNN: a ``Conv2D`` placed
    on a CPU, in a dtype ``_FusedConv2D`` rejects."""
    if conv.type != "Conv2D":
        return False
    placed_on = tf.DeviceSpec.from_string(conv.device).device_type or device_type()
    return placed_on == "CPU" and not op_def_allows(GRAPPLER_FUSED_CONV, frozenset({"T"}), conv.get_attr("T"))


def _chain(bias_add: tf.Operation) -> List[tf.Operation]:
    """``bias_add``'s convolution, ``bias_add``, then the activation the remapper fuses with them, if any."""
    chain = [bias_add.inputs[0].op, bias_add]
    while True:
        end = chain[-1]
        consumers = end.outputs[0].consumers()
        if len(consumers) != 1 or end._control_outputs:
            return chain
        (following,) = consumers
        if following.inputs[0].op is not end or not fuses_into(following) or following.control_inputs:
            return chain
        chain.append(following)


def _already_fused(bias_add: tf.Operation) -> bool:
    """Whether an earlier call fused ``bias_add``'s chain (the old chain waits for its fused op)."""
    return any(control.type == ONEDNN_FUSED_CONV for control in bias_add.control_inputs)


def _fused_op(chain: List[tf.Operation], label: str) -> tf.Operation:
    """The op oneDNN's layout pass would make of ``chain``, created beside it."""
    conv, bias_add, tail = chain[0], chain[1], chain[-1]
    dtype = conv.get_attr("T")
    op_attrs = {attr.name for attr in op_def_registry.get(ONEDNN_FUSED_CONV).attr}
    attrs: Dict[str, attr_value_pb2.AttrValue] = {k: v for k, v in conv.node_def.attr.items() if k in op_attrs}
    value = attr_value_pb2.AttrValue
    attrs.update(
        TArgs=value(list=value.ListValue(type=[dtype.as_datatype_enum])), num_args=value(i=1),
        num_host_args=value(i=0), fused_ops=value(list=value.ListValue(s=[op.type.encode() for op in chain[1:]])),
        is_filter_const=value(b=conv.inputs[1].op.type == "Const"), _kernel=value(s=label.encode()),
    )
    if tail.type == "LeakyRelu":
        attrs["leakyrelu_alpha"] = tail.node_def.attr["alpha"]
    graph = conv.graph
    with graph.as_default(), graph.name_scope(None), graph.control_dependencies(None), \
            graph.colocate_with(None, ignore_existing=True):
        fused = graph._create_op_internal(
            ONEDNN_FUSED_CONV, [conv.inputs[0], conv.inputs[1], bias_add.inputs[1]], name=f"{tail.name}_fused",
            attrs=attrs, compute_device=False)
    fused._set_device(tail.device)
    waits_for = [c for op in chain for c in op.control_inputs if c not in chain]
    if waits_for:
        fused._add_control_inputs(list(dict.fromkeys(waits_for)))
    return fused


def _take_over(chain: List[tf.Operation], fused: tf.Operation) -> None:
    """Point the consumers of ``chain``'s last op, and every op waiting for one of ``chain``'s, at ``fused``."""
    tail = chain[-1]
    for consumer in tail.outputs[0].consumers():
        for index, tensor in enumerate(consumer.inputs):
            if tensor.op is tail:
                consumer._update_input(index, fused.outputs[0])
    for op in chain:
        for waiting in op._control_outputs:
            if waiting in chain or waiting is fused:
                continue
            controls = list(dict.fromkeys(fused if c in chain else c for c in waiting.control_inputs))
            waiting._remove_all_control_inputs()
            waiting._add_control_inputs(controls)
    chain[1]._add_control_inputs([fused])


def form_worker_fusions(graph: tf.Graph) -> Tuple[WorkerFusion, ...]:
    """Fuse each convolution chain of ``graph`` that a cluster's worker would refuse from grappler, as oneDNN
    names it (see the module's docstring). Returns what was fused, in graph order; empty without oneDNN or
    when an earlier call fused them all."""
    if not onednn_enabled():
        return ()
    chains = [
        _chain(consumer) for conv in graph.get_operations() if _refused_on_workers(conv)
        for consumer in conv.outputs[0].consumers() if consumer.type == "BiasAdd" and fuses_into(consumer)
        and consumer.inputs[0].op is conv and not _already_fused(consumer)
    ]
    fusions = []
    for chain in chains:
        label = _onednn_kernel_label(chain[0].get_attr("T"))
        if label is None:
            continue
        fused = _fused_op(chain, label)
        _take_over(chain, fused)
        fusions.append(WorkerFusion(tuple(op.name for op in chain), tuple(op.type for op in chain[1:]), fused.name))
    return tuple(fusions)
