"""The graph pass on small hand-built graphs: where ops go low, where casts go, and the contracts."""

import json

import numpy as np
import pytest
import tensorflow as tf

import slim_mp
from graph_checks import float32_math_ops, ops_of_type, reachable_ops

PRECISIONS = [tf.bfloat16, tf.float16]


def _conv(x, channels, name):
    kernel = tf.compat.v1.get_variable(
        f"{name}/weights", [3, 3, x.shape[-1], channels],
        initializer=tf.compat.v1.initializers.random_normal(stddev=0.1, seed=1))
    return tf.nn.conv2d(x, kernel, 1, "SAME", name=name)


def _small_net(images, labels):
    """conv -> bias -> relu -> maxpool -> conv -> residual add -> reshape -> matmul -> loss."""
    net = _conv(images, 8, "conv1")
    bias = tf.compat.v1.get_variable("conv1/biases", [8], initializer=tf.compat.v1.zeros_initializer())
    net = tf.nn.relu(tf.nn.bias_add(net, bias))
    net = tf.nn.max_pool2d(net, 2, 2, "VALID")
    net = tf.add(net, _conv(net, 8, "conv2"), name="residual")
    net = tf.reshape(net, [-1, 4 * 4 * 8])
    weights = tf.compat.v1.get_variable("fc/weights", [128, 5],
                                        initializer=tf.compat.v1.initializers.random_normal(stddev=0.1, seed=2))
    logits = tf.matmul(net, weights, name="logits")
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    return logits, loss


def _graph_with_net():
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3], name="images")
        labels = tf.compat.v1.placeholder(tf.int64, [2], name="labels")
        logits, loss = _small_net(images, labels)
    return graph, images, labels, logits, loss


def _feed(images, labels):
    rng = np.random.RandomState(0)
    return {images: rng.rand(2, 8, 8, 3).astype(np.float32), labels: [1, 3]}


@pytest.mark.parametrize("precision", PRECISIONS, ids=lambda d: d.name)
def test_body_runs_low_and_casts_sit_only_at_borders(precision):
    graph, images, labels, logits, loss = _graph_with_net()
    with graph.as_default():
        report = slim_mp.rewrite(loss, precision, device_type="CPU")
    ops = reachable_ops(loss)
    assert not float32_math_ops(ops)
    for op_type in ("Relu", "MaxPool", "BiasAdd", "AddV2", "Reshape"):
        assert all(op.outputs[0].dtype == precision for op in ops_of_type(ops, op_type)), op_type
    casts = ops_of_type(ops, "Cast")
    to_low = sorted(c.inputs[0].op.name for c in casts if c.get_attr("DstT") == precision)
    to_float32 = [c.inputs[0].op.name for c in casts if c.get_attr("DstT") == tf.float32]
    # One cast per variable read and one for the images; one back to float32 for the loss.
    assert len(to_low) == 5 and "images" in to_low
    assert len(to_float32) == 1 and to_float32[0].startswith("logits")
    assert len(report.casts) == 6
    assert ops_of_type(ops, "SparseSoftmaxCrossEntropyWithLogits")[0].outputs[0].dtype == tf.float32


def test_variables_keep_names_dtype_and_get_float32_gradients():
    graph, images, labels, logits, loss = _graph_with_net()
    with graph.as_default():
        names_before = [v.name for v in tf.compat.v1.global_variables()]
        slim_mp.rewrite(loss, "bfloat16", device_type="CPU")
        variables = tf.compat.v1.global_variables()
        grads = tf.compat.v1.gradients(loss, variables)
    assert [v.name for v in variables] == names_before
    assert all(v.dtype.base_dtype == tf.float32 for v in variables)
    assert all(g.dtype == tf.float32 for g in grads)
    assert not float32_math_ops(reachable_ops(grads))


@pytest.mark.parametrize("precision, tolerance", [(tf.bfloat16, 5e-2), (tf.float16, 5e-3)],
                         ids=["bfloat16", "float16"])
def test_forward_and_gradients_match_float32_reference(precision, tolerance):
    """Same initial weights, same inputs: mixed results equal fp32 within the low type's precision."""
    results = {}
    for mode in ("float32", "mixed"):
        graph, images, labels, logits, loss = _graph_with_net()
        with graph.as_default():
            if mode == "mixed":
                slim_mp.rewrite(loss, precision, device_type="CPU")
            grads = tf.compat.v1.gradients(loss, tf.compat.v1.trainable_variables())
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                results[mode] = session.run([logits, loss] + grads, _feed(images, labels))
    for reference, mixed in zip(results["float32"], results["mixed"]):
        scale = np.abs(reference).max() + 1e-6
        assert np.abs(np.asarray(mixed, np.float32) - reference).max() / scale < tolerance


def test_deny_taints_downstream_infer_ops():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3])
        net = _conv(x, 4, "conv1")
        exp = tf.exp(net, name="exp")
        added = tf.add(exp, 1.0, name="after_exp")
        out = _conv(added, 4, "conv2")
        report = slim_mp.rewrite(out, "float16", device_type="CPU")
    ops = reachable_ops(report.remap(out))
    by_name = {op.name: op for op in ops}
    assert by_name["exp"].outputs[0].dtype == tf.float32
    assert by_name["after_exp"].outputs[0].dtype == tf.float32
    assert "after_exp" in report.float32_ops["downstream of a deny op"]
    assert not float32_math_ops(ops)


def test_clear_chain_into_allow_is_not_tainted():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 6])
        reshaped = tf.reshape(tf.exp(x), [6, 4], name="reshaped")
        out = tf.matmul(reshaped, tf.ones([4, 3]), name="product")
        report = slim_mp.rewrite(out, "float16", device_type="CPU")
    reshape_ops = [op for op in reachable_ops(report.remap(out)) if op.type == "Reshape"]
    assert reshape_ops[0].outputs[0].dtype == tf.float16


def test_constants_are_folded_not_cast():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3])
        out = tf.multiply(_conv(x, 4, "conv"), tf.constant(3.0, name="three"), name="scaled")
        report = slim_mp.rewrite(out, "bfloat16", device_type="CPU")
    ops = reachable_ops(report.remap(out))
    assert not [c for c in ops_of_type(ops, "Cast") if c.inputs[0].op.type == "Const"]
    assert [c.dtype for c in report.folded_constants] == ["bfloat16"]
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        feed = {x: np.ones([2, 8, 8, 3], np.float32)}
        # Both sides see the same bfloat16 conv output; the product itself rounds to bfloat16 (2**-8).
        np.testing.assert_allclose(session.run(report.remap(out), feed),
                                   3.0 * session.run(report.remap(graph.get_tensor_by_name("conv:0")), feed),
                                   rtol=2 ** -8)


def test_one_cast_per_tensor_shared_by_all_consumers():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3], name="shared_input")
        out = tf.add(_conv(x, 4, "a"), _conv(x, 4, "b"))
        slim_mp.rewrite(out, "bfloat16", device_type="CPU")
    casts_of_input = [op for op in graph.get_operations()
                      if op.type == "Cast" and op.inputs[0].op.name == "shared_input"]
    assert len(casts_of_input) == 1


def test_existing_consumers_are_rerouted_and_remap_keeps_dtypes():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3])
        features = tf.nn.relu(_conv(x, 4, "conv"), name="features")
        probe = tf.identity(features, name="probe")  # e.g. a summary, built before the rewrite
        end_points = {"features": features, "nested": [features]}
        out = tf.reduce_sum(_conv(features, 4, "head"))
        report = slim_mp.rewrite(out, "bfloat16", device_type="CPU")
        remapped, out = report.remap((end_points, out))
    assert remapped["features"].dtype == tf.float32
    assert remapped["features"] is remapped["nested"][0]
    assert probe.op.inputs[0].op.type == "Cast"
    assert probe.op.inputs[0].op.inputs[0].dtype == tf.bfloat16
    reached = reachable_ops([probe, out, remapped["features"]])
    assert "conv" not in {op.name for op in reached}, "the float32 conv must not run any more"


def test_collections_are_remapped():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3])
        features = _conv(x, 4, "conv")
        tf.compat.v1.add_to_collection("my_end_points", features)
        out = _conv(features, 4, "conv2")
        slim_mp.rewrite(out, "float16", device_type="CPU")
        collected = tf.compat.v1.get_collection("my_end_points")[0]
    assert collected.dtype == tf.float32 and collected.op.type == "Cast"


def test_rewrite_twice_changes_nothing():
    graph, images, labels, logits, loss = _graph_with_net()
    with graph.as_default():
        slim_mp.rewrite(loss, "bfloat16", device_type="CPU")
        count = len(graph.get_operations())
        second = slim_mp.rewrite(loss, "bfloat16", device_type="CPU")
    assert len(graph.get_operations()) == count
    assert second.ops_converted == 0 and not second.conversions and not second.warnings


def test_dry_run_plans_without_touching_the_graph():
    graph, images, labels, logits, loss = _graph_with_net()
    with graph.as_default():
        count = len(graph.get_operations())
        plan = slim_mp.rewrite(loss, "bfloat16", device_type="CPU", dry_run=True)
        assert len(graph.get_operations()) == count
        done = slim_mp.rewrite(loss, "bfloat16", device_type="CPU")
    assert (plan.ops_converted, len(plan.casts)) == (done.ops_converted, len(done.casts))
    with pytest.raises(ValueError, match="dry run"):
        plan.remap(loss)


def test_keep_fp32_scopes_and_overrides():
    graph, images, labels, logits, loss = _graph_with_net()
    with graph.as_default():
        report = slim_mp.rewrite(loss, "bfloat16", device_type="CPU", keep_fp32_scopes=["conv2"],
                                 deny=["Relu"])
    by_name = {op.name: op for op in reachable_ops(loss)}
    assert by_name["conv2"].outputs[0].dtype == tf.float32
    assert by_name["Relu"].outputs[0].dtype == tf.float32
    assert "conv2" in report.float32_ops["under keep-float32 scope 'conv2'"]


@pytest.mark.parametrize("control_flow_v2, reason", [
    (False, "inside TF1 control flow (tf.while_loop/tf.cond): left float32, cast at the border"),
    (True, "function or functional control flow: its body is not rewritten, cast at the border"),
], ids=["v1", "v2"])
def test_loops_stay_float32_with_casts_at_the_border(control_flow_v2, reason):
    graph = tf.Graph()
    if not control_flow_v2:
        tf.compat.v1.disable_control_flow_v2()
    try:
        with graph.as_default():
            x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3])
            features = _conv(x, 4, "conv")
            _, looped = tf.compat.v1.while_loop(
                lambda i, v: i < 3, lambda i, v: (i + 1, v * 1.5), [tf.constant(0), features])
            out = _conv(looped, 4, "conv_after")
            report = slim_mp.rewrite(out, "bfloat16", device_type="CPU")
            out = report.remap(out)
    finally:
        tf.compat.v1.enable_control_flow_v2()
    assert report.float32_ops[reason]
    assert not float32_math_ops(reachable_ops(out))
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        assert np.isfinite(session.run(out, {x: np.ones([2, 8, 8, 3], np.float32)})).all()


def test_fused_batch_norm_v1_is_upgraded_with_float32_statistics():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3])
        net = _conv(x, 4, "conv")
        scale, offset = tf.ones([4]), tf.zeros([4])
        y, mean, variance, _, _ = tf.raw_ops.FusedBatchNorm(
            x=net, scale=scale, offset=offset, mean=tf.zeros([0]), variance=tf.zeros([0]), is_training=True)
        out = _conv(tf.nn.relu(y), 4, "conv2")
        report = slim_mp.rewrite([out, mean], "bfloat16", device_type="CPU")
        out, mean = report.remap([out, mean])
    batch_norms = ops_of_type(reachable_ops(out), "FusedBatchNormV3")
    assert len(batch_norms) == 1 and batch_norms[0].get_attr("U") == tf.float32
    assert batch_norms[0].outputs[0].dtype == tf.bfloat16 and mean.dtype == tf.float32
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        assert np.isfinite(session.run(out, {x: np.ones([2, 8, 8, 3], np.float32)})).all()


def test_report_is_json_ready_and_readable():
    graph, images, labels, logits, loss = _graph_with_net()
    with graph.as_default():
        report = slim_mp.rewrite(loss, "bfloat16", device_type="CPU")
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ops_converted"] == report.ops_converted and data["casts_inserted"] == 6
    assert data["class_counts"]["allow"]["Conv2D"] == {"converted": 2, "seen": 2}
    assert "converted" in report.summary() and "Conv2D 2/2" in report.summary()


def test_nothing_to_convert_is_a_warning():
    graph = tf.Graph()
    with graph.as_default():
        out = tf.exp(tf.compat.v1.placeholder(tf.float32, [3]))
        with pytest.warns(UserWarning, match="nothing was converted"):
            report = slim_mp.rewrite(out, "bfloat16", device_type="CPU")
    assert report.warnings


def test_float16_on_cpu_warns_and_suggests_bfloat16():
    graph, images, labels, logits, loss = _graph_with_net()
    with graph.as_default(), pytest.warns(UserWarning, match="bfloat16"):
        slim_mp.rewrite(loss, "float16", device_type="CPU")


@pytest.mark.parametrize("kwargs, message", [
    ({"precision": "float8"}, "Unknown precision"),
    ({"precision": tf.float32}, "not a mixed precision"),
    ({"allow": ["Conv2d"]}, "Did you mean 'Conv2D'"),
    ({"allow": ["Relu"], "deny": ["Relu"]}, "both 'allow' and 'deny'"),
    ({"device_type": "TPU"}, "device_type"),
])
def test_bad_arguments_name_the_culprit(kwargs, message):
    graph, images, labels, logits, loss = _graph_with_net()
    with graph.as_default(), pytest.raises(ValueError, match=message):
        slim_mp.rewrite(loss, **kwargs)


def test_rewrite_after_gradients_is_refused():
    graph, images, labels, logits, loss = _graph_with_net()
    with graph.as_default():
        tf.compat.v1.gradients(loss, tf.compat.v1.trainable_variables())
        with pytest.raises(ValueError, match="before gradients"):
            slim_mp.rewrite(loss, "bfloat16", device_type="CPU")


def test_default_tables_name_registered_ops_only():
    from slim_mp.graph_pass.op_classes import CLASS_NAMES, FUSED_INTO_PRODUCER, check_op_type
    for classes in (slim_mp.FLOAT16_CLASSES, slim_mp.BFLOAT16_CLASSES):
        names = [t for c in CLASS_NAMES for t in getattr(classes, c)]
        assert len(names) == len(set(names)), "an op type is in two classes"
        for op_type in names:
            check_op_type(op_type)
    for consumer, producers in FUSED_INTO_PRODUCER.items():
        for op_type in (consumer, *producers):
            check_op_type(op_type)


def _dense_head(extra):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 6])
        weights = tf.compat.v1.get_variable("w", [6, 3])
        logits = extra(tf.matmul(x, weights, name="product"))
        loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[0, 1, 2, 0], logits=logits))
        report = slim_mp.rewrite(loss, "bfloat16", device_type="CPU")
    return report, reachable_ops(loss)


def test_tail_after_last_allow_op_runs_float32_when_that_saves_casts():
    def scale(net):
        return tf.multiply(net, tf.compat.v1.get_variable("s", [3]), name="logits")

    report, ops = _dense_head(scale)
    by_name = {op.name: op for op in ops}
    assert by_name["logits"].outputs[0].dtype == tf.float32
    to_float32 = [op for op in ops_of_type(ops, "Cast") if op.get_attr("DstT") == tf.float32]
    assert [c.inputs[0].op.name for c in to_float32] == ["product_bf16"]
    assert len(report.casts) == 3  # x, w, and the product back to float32 (the scale is not cast)


@pytest.mark.parametrize("activation", [None, tf.nn.relu, tf.nn.relu6])
def test_a_bias_add_fused_into_its_product_stays_with_it_though_float32_would_save_a_cast(activation):
    # TensorFlow fuses MatMul + BiasAdd (+ activation) into one kernel: a cast between them would split it.
    def add_bias(net):
        net = tf.nn.bias_add(net, tf.compat.v1.get_variable("b", [3]), name="logits")
        return activation(net, name="activation") if activation else net

    report, ops = _dense_head(add_bias)
    by_name = {op.name: op for op in ops}
    assert by_name["logits_bf16"].inputs[0].op.name == "product_bf16"
    assert by_name["logits_bf16"].outputs[0].dtype == tf.bfloat16
    if activation:
        assert by_name["activation_bf16"].inputs[0].op.name == "logits_bf16"


def test_tail_stays_low_when_float32_would_not_save_casts():
    report, ops = _dense_head(lambda net: tf.nn.relu(net, name="activation"))
    by_name = {op.name: op for op in ops}
    assert by_name["activation_bf16"].outputs[0].dtype == tf.bfloat16


@pytest.mark.parametrize("style", ["tf.function", "Defun"])
def test_graph_function_calls_stay_float32_with_casts_around_them(style):
    """Function calls (PartitionedCall, or an op typed by a Defun's name) are not entered."""
    from tensorflow.python.framework import function

    graph = tf.Graph()
    with graph.as_default():
        def double(x):
            return x * 2.0

        call = tf.function(double) if style == "tf.function" else function.Defun(tf.float32)(double)
        x = tf.compat.v1.placeholder(tf.float32, [2, 8, 8, 3])
        middle = call(_conv(x, 3, "first"))
        middle.set_shape([2, 8, 8, 3])
        out = _conv(middle, 4, "second")
        report = slim_mp.rewrite(out, "bfloat16", device_type="CPU")
        out = report.remap(out)
    assert not float32_math_ops(reachable_ops(out))
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        assert np.isfinite(session.run(out, {x: np.ones([2, 8, 8, 3], np.float32)})).all()
