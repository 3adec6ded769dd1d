"""A cluster step runs a single process's fused kernels, bfloat16 included, with grappler's remapper on.

The oracle is TensorFlow itself: the kernels a traced step executes in one process, against those
its cluster twin executes on a parameter server and a worker (in-process servers on loopback
ports), and the numbers of the single process's step. With oneDNN off (the flipped run of ``make
test``) grappler fuses no bfloat16 convolution and ``form_worker_fusions`` leaves every graph alone.
"""

from typing import Callable, Optional, Sequence, Tuple

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.framework import op_def_registry

from slim_mp.devices import onednn_enabled
from slim_mp.distribute import (ClusterLayout, WorkerFusion, form_worker_fusions, make_cluster_layout)
from loopback_servers import loopback_cluster
from slim_mp.distribute.worker_fusions import GRAPPLER_FUSED_CONV, ONEDNN_FUSED_CONV
from slim_mp.measure.benchmark.benchmark_step import build_benchmark_step, executed_fusions

tf1 = tf.compat.v1

# bfloat16 keeps 8 significant bits: one rounding moves a value by at most 2**-8 of it. The same kernel
# on the same inputs rounds alike; a step with fused or unfused kernels, or the float32 step, differs by
# the few roundings between these two layers' outputs and their gradients.
SAME_KERNEL_TOLERANCE = 2.0 ** -8
BFLOAT16_STEP_TOLERANCE = 2.0 ** -5
# Fused nodes grappler's remapper makes on a CPU, and whether their op definition accepts bfloat16.
REMAPPER_FUSED_OPS = {
    "_FusedConv2D": False, "_FusedDepthwiseConv2dNative": True, "_FusedMatMul": True,
    "_FusedBatchNormEx": True, "_FusedConv3D": True,
}


def _allows_bfloat16(op_type: str) -> bool:
    (t_attr,) = [attr for attr in op_def_registry.get(op_type).attr if attr.name == "T"]
    return tf.bfloat16.as_datatype_enum in t_attr.allowed_values.list.type


def test_of_the_remappers_fused_ops_only_the_convolution_refuses_bfloat16_and_onednns_name_accepts_it():
    # The cause, read from TensorFlow's registry: a worker checks nodes against these definitions.
    assert {op: _allows_bfloat16(op) for op in REMAPPER_FUSED_OPS} == REMAPPER_FUSED_OPS
    assert not _allows_bfloat16(GRAPPLER_FUSED_CONV) and _allows_bfloat16(ONEDNN_FUSED_CONV)


def test_a_cluster_keeps_grapplers_remapper_on():
    layout = make_cluster_layout(num_ps_tasks=1, ps_hosts=["ps:2222"], worker_hosts=["worker:2222"])
    rewrite_options = layout.session_config().graph_options.rewrite_options
    assert rewrite_options.remapping == rewriter_config_pb2.RewriterConfig.DEFAULT


def _single_and_cluster_fusions(config: str, model: str, precision: tf.DType, batch_size: int, image_size: int,
                                num_classes: int) -> Tuple[Tuple[Tuple[str, int], ...], ...]:
    """The fused kernels one step of ``model`` runs in one process, then with a parameter server and a worker."""
    layout, target = loopback_cluster()
    steps = [build_benchmark_step(config, model, precision, batch_size, image_size, num_classes=num_classes),
             build_benchmark_step(config, model, precision, batch_size, image_size, num_classes=num_classes,
                                  layout=layout, target=target)]
    try:
        return tuple(executed_fusions(step) for step in steps)
    finally:
        for step in steps:
            step.session.close()


PRECISIONS = [("float32", tf.float32), ("slim_mp_static", tf.float16), ("slim_mp_static", tf.bfloat16)]


@pytest.mark.executed_ops
@pytest.mark.parametrize("config,precision", PRECISIONS, ids=[p.name for _, p in PRECISIONS])
def test_a_cluster_step_runs_the_fused_kernels_of_a_single_process_step(config, precision):
    # LeNet: two conv + bias + relu, a matmul + bias + relu and a matmul + bias.
    single, cluster = _single_and_cluster_fusions(config, "lenet", precision, 2, 16, num_classes=10)
    assert cluster == single
    if precision == tf.float32 or (precision == tf.bfloat16 and onednn_enabled()):
        assert dict(single)["_FusedConv2D"] == 2, single  # the table compared holds the convolutions


@pytest.mark.slow
@pytest.mark.executed_ops
@pytest.mark.parametrize("config,precision", [PRECISIONS[0], PRECISIONS[2]], ids=["float32", "bfloat16"])
def test_a_resnet_50_cluster_step_runs_the_fused_kernels_of_a_single_process_step(config, precision):
    # The run: 224 px, batch 8, 1 parameter server + 1 worker.
    single, cluster = _single_and_cluster_fusions(config, "resnet_v1_50", precision, 8, 224, num_classes=1000)
    assert cluster == single
    assert dict(single).get("_FusedConv2D") == (1 if precision == tf.float32 or onednn_enabled() else None), single


def _two_layers(dtype: tf.DType) -> Tuple[tf.Tensor, tf.Tensor]:
    """A conv + bias + relu, then a pointwise conv + bias, in ``dtype`` with float32 weights: (output, tail)."""
    rng = np.random.RandomState(0)
    images = tf.constant(rng.uniform(-1, 1, [2, 8, 8, 3]).astype(np.float32))
    weights = [tf1.get_variable(name, initializer=rng.normal(0, 0.5, shape).astype(np.float32))
               for name, shape in (("w1", [3, 3, 3, 8]), ("b1", [8]), ("w2", [1, 1, 8, 4]), ("b2", [4]))]
    w1, b1, w2, b2 = [tf.cast(weight, dtype) for weight in weights]
    hidden = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(tf.cast(images, dtype), w1, 1, "SAME"), b1))
    tail = tf.nn.bias_add(tf.nn.conv2d(hidden, w2, 1, "VALID"), b2)
    return tf.cast(tail, tf.float32), tail


def _run_two_layers(dtype: tf.DType, cluster: Tuple[ClusterLayout, str] = (ClusterLayout(), ""),
                    remapper: bool = True, read_later: Optional[Callable[[tf.Tensor], tf.Tensor]] = None,
                    form_fusions: bool = True) -> Tuple[Sequence[np.ndarray], Tuple[WorkerFusion, ...]]:
    """The output and weight gradients of ``_two_layers`` (in ``cluster``, with its workers' fusions formed),
    then ``read_later`` of the last layer's tensor, built after them; and the fusions formed."""
    layout, target = cluster
    graph = tf.Graph()
    with graph.as_default(), tf1.device(layout.device_setter()):
        output, tail = _two_layers(dtype)
        fetches = [output] + tf.gradients(tf.reduce_sum(tf.square(output)), tf1.trainable_variables())
        init = tf1.global_variables_initializer()
        fusions = form_worker_fusions(graph) if layout.distributed and form_fusions else ()
        if read_later:
            fetches.append(read_later(tail))
    config = layout.session_config() or tf1.ConfigProto()
    if not remapper:
        config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
    with tf1.Session(target, graph=graph, config=config) as session:
        session.run(init)
        return session.run(fetches), fusions


def _assert_close(values: Sequence[np.ndarray], expected: Sequence[np.ndarray], tolerance: float) -> None:
    assert len(values) == len(expected)
    for value, reference in zip(values, expected):
        np.testing.assert_allclose(value, reference, rtol=0, atol=tolerance * np.max(np.abs(reference)))


@pytest.mark.executed_ops
def test_without_them_a_worker_refuses_grapplers_bfloat16_convolution_under_onednn():
    # TensorFlow's limitation (docs/compatibility.md): the worker checks op definitions before oneDNN's rename.
    if not onednn_enabled():
        assert len(_run_two_layers(tf.bfloat16, loopback_cluster(), form_fusions=False)[0]) == 5
        return
    refused = f"(?s)bfloat16 is not in the list of allowed values.*Op<name={GRAPPLER_FUSED_CONV};"
    with pytest.raises(tf.errors.InvalidArgumentError, match=refused):
        _run_two_layers(tf.bfloat16, loopback_cluster(), form_fusions=False)


@pytest.mark.executed_ops
def test_the_fused_layers_compute_what_the_single_process_computes():
    cluster_values, fusions = _run_two_layers(tf.bfloat16, loopback_cluster())
    assert [fusion.fused_ops for fusion in fusions] == ([("BiasAdd", "Relu"), ("BiasAdd",)] if onednn_enabled() else [])
    _assert_close(cluster_values, _run_two_layers(tf.bfloat16)[0], SAME_KERNEL_TOLERANCE)
    _assert_close(cluster_values, _run_two_layers(tf.bfloat16, remapper=False)[0], BFLOAT16_STEP_TOLERANCE)
    _assert_close(cluster_values, _run_two_layers(tf.float32)[0], BFLOAT16_STEP_TOLERANCE)


@pytest.mark.executed_ops
def test_an_op_built_later_on_a_fused_layer_still_runs_in_a_cluster():
    # It reads the replaced chain: the remapper must not make the refused node of it.
    values, _ = _run_two_layers(tf.bfloat16, loopback_cluster(), read_later=lambda tail: tf.cast(tail, tf.float32))
    _assert_close([values[-1]], [values[0]], BFLOAT16_STEP_TOLERANCE)


def _conv(images: tf.Tensor, channels: int, name: str) -> tf.Tensor:
    kernel = tf.cast(tf1.get_variable(f"{name}/w", [1, 1, images.shape[-1], channels]), images.dtype)
    return tf.nn.conv2d(images, kernel, 1, "SAME", name=name)


def _bias(features: tf.Tensor, name: str) -> tf.Tensor:
    bias = tf.cast(tf1.get_variable(f"{name}/b", [features.shape[-1]]), features.dtype)
    return tf.nn.bias_add(features, bias, name=name)


@pytest.mark.executed_ops
def test_form_worker_fusions_fuses_the_chains_the_remapper_refuses_on_workers():
    graph = tf.Graph()
    with graph.as_default():
        images = tf.zeros([1, 4, 4, 3], tf.bfloat16)
        leaky = tf.nn.leaky_relu(_bias(_conv(images, 4, "a"), "a_bias"), alpha=0.3, name="a_act")
        shared = _conv(leaky, 4, "b")
        logits = _bias(shared, "b_bias")
        also_reads_conv = tf.identity(shared, name="b_reader")
        wide = _bias(_conv(tf.cast(logits, tf.float32), 4, "c"), "c_bias")  # float32: _FusedConv2D accepts it
        half = _bias(_conv(tf.cast(logits, tf.float16), 4, "d"), "d_bias")
        with tf1.device("/device:GPU:0"):
            on_gpu = _bias(_conv(logits, 4, "e"), "e_bias")
        readers = [tf.identity(t) for t in (leaky, logits, wide, half, on_gpu)]
        fusions = form_worker_fusions(graph)
    if not onednn_enabled():
        assert fusions == ()
        return
    assert [(f.ops, f.fused_ops) for f in fusions] == [
        (("a", "a_bias", "a_act"), ("BiasAdd", "LeakyRelu")),
        (("b", "b_bias"), ("BiasAdd",)),  # fused though the convolution has another reader
    ]
    first, second = [graph.get_operation_by_name(f.fused_name) for f in fusions]
    assert first.type == ONEDNN_FUSED_CONV and first.get_attr("leakyrelu_alpha") == pytest.approx(0.3)
    assert first.get_attr("_kernel") and first.get_attr("T") == tf.bfloat16
    assert [r.op.inputs[0].op for r in readers[:2]] == [first, second]
    assert [r.op.inputs[0].op.name for r in readers[2:]] == ["c_bias", "d_bias", "e_bias"]
    assert also_reads_conv.op.inputs[0].op.name == "b"
    assert form_worker_fusions(graph) == ()  # a second call finds them fused
