"""Where the first inf/NaN came from: ``enable_mixed_precision(debug_nonfinite=True)`` and ``--mp_debug_nonfinite``."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim
from absl import logging as absl_logging
from train_configs import lenet_config

import slim_mp
from nets import nets_factory
from slim_mp.loss_scale import TrainingDivergedError
from slim_mp.training import train_graph
from slim_mp.training.loop import train
from slim_mp.training.precision_flags import LossScaleOptions, PrecisionOptions

tf1 = tf.compat.v1
BATCH, FEATURES, CLASSES = 8, 16, 4


def _tiny_model(x: tf.Tensor, risky) -> tf.Tensor:
    """fc1 -> times risky(gate) -> fc2 -> loss; ``gate`` (trained) passes the first input column unchanged."""
    hidden = slim.fully_connected(x, 32, scope="fc1")
    gate = slim.fully_connected(x[:, 0:1], 1, weights_initializer=tf1.ones_initializer(), biases_initializer=None,
                                activation_fn=None, scope="gate")
    hidden = hidden * risky(gate)
    logits = slim.fully_connected(hidden, CLASSES, activation_fn=None, scope="fc2")
    labels = tf.zeros([BATCH], tf.int64)
    return tf1.losses.sparse_softmax_cross_entropy(labels, logits)


def _run_skipped_step(risky, bad_input: np.ndarray, precision: str = "bfloat16", loss_scale=None, **layers):
    """Train one step on a finite-producing batch, then one on ``bad_input``; return (origin, skipped steps)."""
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(0)
        x = tf1.placeholder(tf.float32, [BATCH, FEATURES])
        loss = _tiny_model(x, risky)
        optimizer = slim_mp.enable_mixed_precision(
            tf1.train.GradientDescentOptimizer(0.01), precision, loss_scale=loss_scale, debug_nonfinite=True)
        train_op = optimizer.minimize(loss)
        (probe,) = optimizer.nonfinite_probes
        with tf1.Session() as session:
            session.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            good = np.full([BATCH, FEATURES], 0.5, np.float32)
            for batch in (good, bad_input):
                _, captured = session.run([train_op, probe.captured], {x: batch})
                replay = dict(zip(probe.captured, captured))
                replay[x] = batch
                origin = probe.diagnose(session, replay)
                if batch is good:
                    assert origin is None
            return origin, session.run(optimizer.skipped_steps)


def test_nan_in_the_forward_pass_names_the_op():
    bad = np.full([BATCH, FEATURES], 0.5, np.float32)
    bad[3, 0] = -5.0  # log(-3) is NaN for this one example
    unsafe_log = lambda column: tf.math.log(column + 2.0, name="unsafe_log")  # noqa: E731
    origin, skipped = _run_skipped_step(unsafe_log, bad, precision="float16", loss_scale=1.0)
    assert skipped == 1
    assert origin.op_name == "unsafe_log"  # float16 keeps logs float32 (deny list)
    assert not origin.backward
    assert origin.dtype == "float32" and not origin.low_precision
    origin, _ = _run_skipped_step(unsafe_log, bad, precision="bfloat16")
    assert origin.op_name == "unsafe_log_bf16"  # bfloat16 runs it low: the rebuilt op is named
    assert origin.low_precision and not origin.backward


def test_inf_in_the_backward_pass_names_the_gradient_op():
    bad = np.full([BATCH, FEATURES], 0.5, np.float32)
    bad[0, 0] = 0.0  # sqrt(0) is finite, its gradient 1 / (2 sqrt(0)) is not
    origin, skipped = _run_skipped_step(lambda column: tf.math.sqrt(column, name="sqrt_at_zero"), bad)
    assert skipped == 1
    assert origin.backward
    assert origin.op_type == "SqrtGrad"
    assert "sqrt_at_zero" in origin.op_name


def test_float16_overflow_names_the_low_precision_op_and_the_scale_of_that_step():
    def huge_layer(column):
        return slim.fully_connected(column, 32, weights_initializer=tf1.constant_initializer(100.0),
                                    activation_fn=None, scope="huge")

    bad = np.full([BATCH, FEATURES], 0.5, np.float32)
    bad[:, 0] = 1000.0  # times 100 exceeds float16's 65504 in huge/MatMul
    origin, _ = _run_skipped_step(huge_layer, bad, precision="float16", loss_scale=256.0)
    assert origin.op_name.startswith("huge/")
    assert origin.low_precision and origin.dtype == "float16"
    assert not origin.backward
    assert origin.loss_scale == 256.0


def test_the_dynamic_scale_reported_is_the_one_of_the_failing_step_not_the_lowered_one():
    bad = np.full([BATCH, FEATURES], 0.5, np.float32)
    bad[3, 0] = -5.0
    origin, _ = _run_skipped_step(lambda column: tf.math.log(column + 2.0, name="unsafe_log"), bad,
                                  precision="float16", loss_scale="dynamic")
    assert origin.loss_scale == 2.0 ** 15  # the skip halved the variable to 2**14 afterwards


def test_nan_already_in_the_input_batch_is_named_as_the_input_not_the_cast_that_reads_it():
    # The second batch holds one NaN feature: a float32 input, cast to bfloat16 by the first op that reads it.
    batches = np.full([2 * BATCH, FEATURES], 0.5, np.float32)
    batches[BATCH + 2, 5] = np.nan
    with tf.Graph().as_default():
        data = tf.data.Dataset.from_tensor_slices((batches, np.zeros([2 * BATCH], np.int64))).batch(BATCH)
        x, labels = tf1.data.make_one_shot_iterator(data).get_next()
        logits = slim.fully_connected(x, CLASSES, activation_fn=None, scope="fc")
        loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
        optimizer = slim_mp.enable_mixed_precision(
            tf1.train.GradientDescentOptimizer(0.01), "bfloat16", placement="static", debug_nonfinite=True)
        train_op = optimizer.minimize(loss)
        (probe,) = optimizer.nonfinite_probes
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            origins = []
            for _ in range(2):
                replay = dict(zip(probe.captured, session.run(probe.captured)))
                session.run(train_op, replay)
                origins.append(probe.diagnose(session, replay))
    assert origins[0] is None
    assert isinstance(origins[1], slim_mp.numerics.NonfiniteInput)
    assert origins[1].describe() == f"the input batch already held NaN (features, {x.name!r})"


def test_without_the_option_no_probe_is_built():
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, [BATCH, FEATURES])
        loss = _tiny_model(x, lambda column: column)
        optimizer = slim_mp.enable_mixed_precision(tf1.train.GradientDescentOptimizer(0.01), "bfloat16")
        optimizer.minimize(loss)
        assert optimizer.nonfinite_probes == []
        assert not [op for op in tf1.get_default_graph().get_operations() if "nonfinite_probe" in op.name]


@pytest.fixture
def warnings_logged(monkeypatch):
    lines = []
    monkeypatch.setattr(absl_logging, "warning", lambda message, *args: lines.append(message % args))
    return lines


SKIP_LIMIT = 10  # the loop's guard, lowered from the default 100: each skipped step is replayed


def test_training_loop_warns_once_per_skipped_step_and_the_guard_names_the_op(tmp_path, warnings_logged,
                                                                              monkeypatch):
    # A fixed scale of 1e30 makes the gradient cast into float16 infinite on every step: all steps are
    # skipped at the (fixed) minimum scale and the divergence guard stops the run.
    limits = []

    def with_a_lower_guard(*args, **kwargs):
        limits.append(kwargs.get("max_consecutive_skips_at_min", "default"))
        return slim_mp.enable_mixed_precision(*args, **kwargs, max_consecutive_skips_at_min=SKIP_LIMIT)

    monkeypatch.setattr(train_graph, "enable_mixed_precision", with_a_lower_guard)
    config = lenet_config(
        str(tmp_path), batch_size=2, max_number_of_steps=2 * SKIP_LIMIT,
        precision_options=PrecisionOptions(precision="float16", mp_debug_nonfinite=True),
        loss_scale_options=LossScaleOptions(loss_scale="1e30"),
    )
    with pytest.raises(TrainingDivergedError) as raised:
        train(config, print_line=lambda line: None)
    assert f"Training diverged: {SKIP_LIMIT} steps in a row were skipped" in str(raised.value)
    assert "first non-finite value came from op" in str(raised.value)
    skipped_lines = [line for line in warnings_logged if "was skipped for non-finite gradients" in line]
    assert limits == ["default"]  # the loop itself keeps the library's guard
    assert len(skipped_lines) == SKIP_LIMIT - 1  # the last skip raises inside the step
    assert "backward pass, low precision (float16)" in skipped_lines[0]
    assert "at loss scale 1e+30" in skipped_lines[0]


def test_normal_steps_of_the_loop_diagnose_nothing(tmp_path, warnings_logged):
    config = lenet_config(str(tmp_path), precision_options=PrecisionOptions(
        precision="bfloat16", mp_debug_nonfinite=True))
    result = train(dataclasses.replace(config, max_number_of_steps=3), print_line=lambda line: None)
    assert result.global_step == 3
    assert not [line for line in warnings_logged if "non-finite" in line]


def _lenet_checkpoint_with_huge_conv2(folder: str) -> str:
    """A LeNet checkpoint whose conv2 weights are 3e4 times too large: representable in float16, its output is not."""
    with tf.Graph().as_default():
        tf1.set_random_seed(0)
        network_fn = nets_factory.get_network_fn("lenet", num_classes=10, is_training=True)
        network_fn(tf.zeros([1, 28, 28, 1]))  # LeNet reads the grayscale data's one channel
        (weights,) = [v for v in tf1.global_variables() if v.op.name == "LeNet/conv2/weights"]
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            session.run(weights.assign(weights * 3e4))
            return tf1.train.Saver().save(session, f"{folder}/huge.ckpt")


def test_a_failed_loss_check_is_explained_with_the_forward_op(tmp_path):
    checkpoint = _lenet_checkpoint_with_huge_conv2(str(tmp_path / "init"))
    config = lenet_config(
        str(tmp_path / "train"), checkpoint_path=checkpoint, weight_decay=0.0,
        precision_options=PrecisionOptions(precision="float16", mp_debug_nonfinite=True),
    )
    with pytest.raises(TrainingDivergedError) as raised:
        train(config, print_line=lambda line: None)
    message = str(raised.value)
    assert "The loss is inf or NaN" in message
    assert "first non-finite value came from op 'LeNet/conv2/Conv2D_fp16'" in message
    assert "forward pass, low precision (float16)" in message


def test_batch_norm_statistics_updated_by_the_failing_step_are_replayed_as_they_were():
    # The skipped step still updates the moving variance with its NaN batch variance; the replay must
    # feed the value the step read (fused batch norm reads it in the forward pass).
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(tf.float32, [BATCH, 2, 2, FEATURES])
        huge = slim.conv2d(x, 8, [1, 1], weights_initializer=tf1.constant_initializer(100.0),
                           normalizer_fn=slim.batch_norm, normalizer_params={"is_training": True}, scope="huge")
        logits = slim.fully_connected(slim.flatten(huge), CLASSES, activation_fn=None, scope="logits")
        loss = tf1.losses.sparse_softmax_cross_entropy(tf.zeros([BATCH], tf.int64), logits)
        optimizer = slim_mp.enable_mixed_precision(
            tf1.train.GradientDescentOptimizer(0.01), "float16", loss_scale=1.0, debug_nonfinite=True)
        train_op = tf.group(optimizer.minimize(loss), *tf1.get_collection(tf1.GraphKeys.UPDATE_OPS))
        (probe,) = optimizer.nonfinite_probes
        moving_variance = [v for v in tf1.global_variables() if "moving_variance" in v.op.name][0]
        captured_reads = {t.op.inputs[0].op for t in probe.captured if t.op.type == "ReadVariableOp"}
        assert moving_variance.handle.op in captured_reads
        bad = np.full([BATCH, 2, 2, FEATURES], 0.5, np.float32)
        bad[..., 0] = 1000.0
        with tf1.Session() as session:
            session.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            replay = dict(zip(probe.captured, session.run(probe.captured, {x: bad})))
            replay[x] = bad
            session.run(train_op, replay)
            assert not np.isfinite(session.run(moving_variance)).all()
            origin = probe.diagnose(session, replay)
    assert origin.op_name.startswith("huge/Conv2D") and origin.low_precision
