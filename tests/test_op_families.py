"""Executed kernels by op family: every oneDNN and grappler kernel TensorFlow registers, and what a step runs.

The registered names come from TensorFlow's op registry, not from ``slim_mp.op_families``, so a
TensorFlow that adds or renames a kernel fails here instead of in a profile report.
"""

from typing import FrozenSet

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session

from slim_mp.op_families import FUSED_KERNEL_FAMILIES, ONEDNN_PREFIXES, fusion_name, op_family

tf1 = tf.compat.v1
pytestmark = pytest.mark.executed_ops

# oneDNN's fusions of element-wise subgraphs: no graph op does their work, so they keep their base name.
ELEMENTWISE_FUSIONS = frozenset({"FusedInstanceNorm", "FusedMish", "LayerNorm", "Swish"})
# Kernels of the runtime itself (arguments, results, transfers between devices).
RUNTIME_KERNELS = frozenset({"_Arg", "_Retval", "_Send", "_Recv", "_HostSend", "_HostRecv", "NoOp"})


def _registered_ops() -> FrozenSet[str]:
    op_list = op_def_pb2.OpList()
    op_list.ParseFromString(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
    return frozenset(op.name for op in op_list.op)


REGISTERED = _registered_ops()


def test_known_kernels_name_the_op_a_user_built():
    assert op_family("_MklNativeConv2DBackpropFilter") == "Conv2DBackpropFilter"
    assert op_family("_MklMatMul") == "MatMul"
    assert op_family("_MklNativeFusedMatMul") == "MatMul"
    assert op_family("_MklNativeFusedBatchNormEx") == "FusedBatchNormV3"
    assert op_family("_MklNativePadWithFusedConv2D") == "Conv2D"
    assert op_family("_FusedConv2D") == "Conv2D"
    assert op_family("Conv2DBackpropInput") == "Conv2DBackpropInput"
    assert op_family("_Retval") == "_Retval"


def test_fusions_are_named_alike_with_and_without_onednn():
    assert fusion_name("_MklNativeFusedConv2D") == fusion_name("_FusedConv2D") == "_FusedConv2D"
    assert fusion_name("_MklNativeFusedBatchNormEx") == "_FusedBatchNormEx"
    assert fusion_name("_MklNativePadWithFusedConv2D") == "_PadWithFusedConv2D"
    assert fusion_name("_MklFusedMatMul") == "_FusedMatMul"
    for single in ("Conv2D", "_MklNativeConv2D", "_MklMatMul", "Cast", "FusedBatchNormV3", "_Retval"):
        assert fusion_name(single) is None, single


def test_every_registered_onednn_kernel_belongs_to_a_registered_graph_op():
    onednn = sorted(name for name in REGISTERED if name.startswith(ONEDNN_PREFIXES))
    assert len(onednn) > 50, onednn  # the registry was read
    orphans = {name: op_family(name) for name in onednn
               if op_family(name) not in REGISTERED or op_family(name).startswith("_")}
    assert set(orphans.values()) == ELEMENTWISE_FUSIONS, orphans


def test_every_registered_grappler_fusion_belongs_to_a_registered_graph_op():
    fusions = sorted(name for name in REGISTERED if name.startswith("_Fused") and "Quantized" not in name)
    assert fusions, "no _Fused kernels registered"
    for name in fusions:
        assert op_family(name) in REGISTERED and not op_family(name).startswith("_"), name
    assert all(family in REGISTERED for family in FUSED_KERNEL_FAMILIES.values())


def test_a_training_step_runs_kernels_of_the_ops_it_was_built_from():
    graph = tf.Graph()
    with graph.as_default():
        rng = np.random.RandomState(0)
        images = tf1.get_variable("images", initializer=rng.uniform(-1, 1, (2, 6, 6, 3)).astype(np.float32))
        kernel = tf1.get_variable("kernel", (3, 3, 3, 4))
        features = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(images, kernel, 1, "SAME"), tf.ones([4])))
        normalized, _, _ = tf1.nn.fused_batch_norm(features, tf.ones([4]), tf.zeros([4]), is_training=True)
        weights = tf1.get_variable("weights", (6 * 6 * 4, 5))
        logits = tf.nn.relu(tf.matmul(tf.reshape(normalized, [2, -1]), weights) + tf.ones([5]))
        train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(logits ** 2))
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            metadata = tf1.RunMetadata()
            session.run(train_op, options=tf1.RunOptions(output_partition_graphs=True), run_metadata=metadata)
    kernels = {node.op for partition in metadata.partition_graphs for node in partition.node}
    families = {op_family(name) for name in kernels} - RUNTIME_KERNELS
    unknown = {name for name in kernels if op_family(name) not in REGISTERED or op_family(name).startswith("_")}
    assert unknown <= RUNTIME_KERNELS, unknown
    built = {"Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "MatMul", "FusedBatchNormV3",
             "FusedBatchNormGradV3"}
    assert built <= families, sorted(kernels)


def test_the_float32_step_of_a_conv_bias_relu_runs_the_fused_kernel_tensorflow_registers():
    # Grappler's remapper fuses Conv2D + BiasAdd + Relu on every CPU (oneDNN renames the fused kernel).
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.get_variable("images", initializer=np.ones((2, 6, 6, 3), np.float32))
        kernel = tf1.get_variable("kernel", (3, 3, 3, 4))
        features = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(images, kernel, 1, "SAME"), tf1.get_variable("b", [4])))
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            metadata = tf1.RunMetadata()
            session.run(features, options=tf1.RunOptions(output_partition_graphs=True), run_metadata=metadata)
    kernels = [node.op for partition in metadata.partition_graphs for node in partition.node]
    fused = [fusion_name(name) for name in kernels if fusion_name(name)]
    assert fused == ["_FusedConv2D"], kernels
    assert all(name in REGISTERED for name in kernels if fusion_name(name)), kernels
