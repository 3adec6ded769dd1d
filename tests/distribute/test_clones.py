"""Model clones in one process (CPU clones): shared variables, summed gradients, one loss-scaling decision."""

import numpy as np
import pytest
import tensorflow as tf
import tf_slim as slim

import slim_mp
from graph_checks import float32_math_ops, live_bytes_per_step, ops_of_type, reachable_ops
from slim_mp.distribute.clones import CloneDevices, create_clones, optimize_clones, sum_clone_gradients
from slim_mp.training.train_config import TrainConfig
from slim_mp.distribute.train_step import build_train_step
from slim_mp.training.loop import train

tf1 = tf.compat.v1
RTOL = 1e-5  # float32 sums in a different order
CPU_CLONES = CloneDevices(num_clones=2, clone_on_cpu=True)


def batches_model(batches, build):
    """A model_fn that gives each clone the next of ``batches`` (inputs, targets) and builds ``build`` on it."""
    remaining = list(batches)

    def model():
        inputs, targets = remaining.pop(0)
        return build(tf.constant(inputs), tf.constant(targets))

    return model


def dense_regression(inputs, targets):
    predictions = slim.fully_connected(
        inputs, 1, activation_fn=None, weights_regularizer=slim.l2_regularizer(0.1), scope="dense"
    )
    tf1.losses.mean_squared_error(targets, predictions)
    return predictions


def test_summed_clone_gradients_equal_the_gradient_of_one_big_batch():
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(8, 3)).astype(np.float32)
    targets = rng.normal(size=(8, 1)).astype(np.float32)
    with tf.Graph().as_default():
        tf1.set_random_seed(0)
        clones = create_clones(
            batches_model([(inputs[:4], targets[:4]), (inputs[4:], targets[4:])], dense_regression), CPU_CLONES
        )
        total_loss, grads_and_vars = optimize_clones(tf1.train.GradientDescentOptimizer(0.1), clones)
        variables = [v for _, v in grads_and_vars]
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            weights = session.run(variables)
            clone_loss, clone_grads = session.run([total_loss, [g for g, _ in grads_and_vars]])
    assert len(variables) == 2  # one weight and one bias, shared by both clones
    weight, bias = weights
    residual = inputs @ weight + bias - targets
    expected_loss = np.mean(residual**2) + 0.1 * 0.5 * np.sum(weight**2)
    expected_weight_grad = 2 * inputs.T @ residual / len(inputs) + 0.1 * weight
    expected_bias_grad = 2 * residual.mean(axis=0)
    assert clone_loss == pytest.approx(expected_loss, rel=RTOL)
    np.testing.assert_allclose(clone_grads[0], expected_weight_grad, rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(clone_grads[1], expected_bias_grad, rtol=RTOL, atol=1e-6)


def conv_bn_net(inputs, targets):
    net = slim.conv2d(inputs, 4, [3, 3], normalizer_fn=slim.batch_norm,
                      normalizer_params={"is_training": True, "decay": 0.5}, scope="conv")
    logits = slim.fully_connected(slim.flatten(net), 3, activation_fn=None, scope="logits")
    tf1.losses.sparse_softmax_cross_entropy(targets, logits)
    return logits


def conv_bn_batches(clone_scales=(1.0, 5.0)):
    rng = np.random.default_rng(1)
    return [
        (scale * rng.uniform(size=(4, 6, 6, 2)).astype(np.float32), rng.integers(0, 3, size=4))
        for scale in clone_scales
    ]


def test_clones_share_variables_and_only_the_first_clone_updates_batch_norm():
    batches = conv_bn_batches()
    with tf.Graph().as_default():
        global_step = tf1.train.get_or_create_global_step()
        clones = create_clones(batches_model(batches, conv_bn_net), CPU_CLONES)
        step = build_train_step(tf1.train.GradientDescentOptimizer(0.0), clones, global_step)
        names = sorted(v.op.name for v in tf1.global_variables())
        moving_mean = next(v for v in tf1.global_variables() if v.op.name.endswith("moving_mean"))
        pre_bn = tf1.get_default_graph().get_tensor_by_name("clone_0/conv/Conv2D:0")
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            first_clone_mean = session.run(pre_bn).mean(axis=(0, 1, 2))
            session.run(step.train_tensor)
            updated = session.run(moving_mean)
    assert not any(name.startswith("clone_") for name in names), names
    assert names.count("conv/BatchNorm/moving_mean") == 1
    np.testing.assert_allclose(updated, 0.5 * first_clone_mean, rtol=1e-4, atol=1e-6)


@pytest.mark.executed_ops
def test_a_float32_train_step_keeps_no_copy_of_the_momentum_slots_after_its_first_update():
    # The training script's float32 step: a plain optimizer, no loss-scale wrapper around it.
    batches = conv_bn_batches()
    with tf.Graph().as_default():
        global_step = tf1.train.get_or_create_global_step()
        clones = create_clones(batches_model(batches, conv_bn_net), CPU_CLONES)
        step = build_train_step(tf1.train.MomentumOptimizer(0.01, 0.9), clones, global_step)
        slot_set = sum(4 * v.shape.num_elements() for v in tf1.trainable_variables())
        first, second = live_bytes_per_step(step.train_tensor)
    assert first - second < slot_set // 2


def test_mixed_precision_clones_are_rewritten_in_one_pass_and_checked_once():
    with tf.Graph().as_default():
        global_step = tf1.train.get_or_create_global_step()
        clones = create_clones(batches_model(conv_bn_batches(), conv_bn_net), CPU_CLONES)
        # A fixed scale of 1 keeps the finite check (bfloat16's default has none) to count it.
        optimizer = slim_mp.enable_mixed_precision(tf1.train.GradientDescentOptimizer(0.1), "bfloat16",
                                                   loss_scale=1.0)
        step = build_train_step(optimizer, clones, global_step)
        ops = reachable_ops(step.train_tensor)
    assert len(optimizer.rewrite_reports) == 1
    assert float32_math_ops(ops) == []
    for clone in ("clone_0/", "clone_1/"):
        assert [op for op in ops_of_type(ops, "Conv2D") if op.name.startswith(clone)], clone
    assert len([op for op in ops if op.name.endswith("/all_finite")]) == 1


def test_an_overflow_in_one_clone_skips_the_step_for_every_clone():
    rng = np.random.default_rng(2)
    small = rng.normal(size=(4, 3)).astype(np.float32)
    large = 200.0 * rng.normal(size=(4, 3)).astype(np.float32)  # scaled gradients overflow float16
    targets = np.zeros((4, 1), np.float32)
    with tf.Graph().as_default():
        global_step = tf1.train.get_or_create_global_step()
        clones = create_clones(batches_model([(small, targets), (large, targets)], dense_regression), CPU_CLONES)
        optimizer = slim_mp.enable_mixed_precision(tf1.train.GradientDescentOptimizer(0.1), "float16")
        step = build_train_step(optimizer, clones, global_step)
        variables = tf1.trainable_variables()
        with tf1.Session() as session:
            session.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            before = session.run(variables)
            scale_before = session.run(optimizer.loss_scale)
            session.run(step.train_tensor)
            after = session.run(variables)
            scale_after, skipped, step_value = session.run([optimizer.loss_scale, optimizer.skipped_steps, global_step])
    for old, new in zip(before, after):
        np.testing.assert_array_equal(old, new)
    assert (scale_after, skipped, step_value) == (scale_before / 2, 1, 0)


def lenet_clone_config(train_dir: str, **changes) -> TrainConfig:
    return TrainConfig(
        train_dir=train_dir, dataset_name="fashion_mnist", model_name="lenet", batch_size=8, max_number_of_steps=2,
        num_preprocessing_threads=1, seed=0, log_every_n_steps=1, **changes,
    )


def test_cpu_clone_training_writes_the_variable_names_of_a_single_clone_run(tmp_path):
    lines = []
    train(lenet_clone_config(str(tmp_path / "one")), print_line=lines.append)
    two = train(
        lenet_clone_config(str(tmp_path / "two"), num_clones=2, clone_on_cpu=True,
                           precision_options=slim_mp.training.precision_flags.PrecisionOptions(precision="bfloat16")),
        print_line=lines.append,
    )
    one_names = tf.train.load_checkpoint(str(tmp_path / "one")).get_variable_to_dtype_map()
    two_names = tf.train.load_checkpoint(str(tmp_path / "two")).get_variable_to_dtype_map()
    assert two.global_step == 2 and two_names == one_names
    assert all(dtype == tf.float32 for name, dtype in two_names.items() if name != "global_step")


@pytest.mark.parametrize("setter_ps_tasks, variable_device, clone_device", [
    (0, "/device:CPU:0", "/device:GPU:1"),
    (1, "/job:ps/task:0", "/job:worker/task:1/device:GPU:1"),
])
def test_gpu_clones_put_ops_on_their_gpu_and_variables_on_the_cpu_or_parameter_server(
        setter_ps_tasks, variable_device, clone_device):
    devices = CloneDevices(num_clones=2, variables_on_ps=setter_ps_tasks > 0)
    setter = tf1.train.replica_device_setter(ps_tasks=setter_ps_tasks, worker_device="/job:worker/task:1")
    with tf.Graph().as_default(), tf1.device(setter):  # building needs no GPU; the devices are recorded
        clones = create_clones(batches_model(conv_bn_batches(), conv_bn_net), devices)
        weights = next(v for v in tf1.global_variables() if v.op.name == "conv/weights")
        conv = tf1.get_default_graph().get_operation_by_name("clone_1/conv/Conv2D")
    assert tf.DeviceSpec.from_string(weights.device) == tf.DeviceSpec.from_string(variable_device)
    assert tf.DeviceSpec.from_string(conv.device) == tf.DeviceSpec.from_string(clone_device)
    assert clones[1].scope == "clone_1"


def test_clone_gradients_made_on_a_parameter_server_are_summed_there_and_elsewhere_where_the_scope_says():
    # The wire side makes a low-precision weight's float32 gradient on the ps: its sum over clones stays there.
    with tf.Graph().as_default():
        variable = tf.compat.v1.get_variable("weight", [4], use_resource=True)
        with tf.device("/job:ps/task:0"):
            on_ps = [tf.ones([4]) * float(clone) for clone in (1, 2)]
        with tf.device("/job:worker/task:0"):
            ((summed_on_ps, _),) = sum_clone_gradients([[(gradient, variable)] for gradient in on_ps])
            ((summed_here, _),) = sum_clone_gradients([[(tf.ones([4]), variable)], [(tf.ones([4]), variable)]])
        unplaced = [tf.ones([4]), tf.ones([4])]
        ((summed_unplaced, _),) = sum_clone_gradients([[(gradient, variable)] for gradient in unplaced])
    assert summed_on_ps.op.type == "AddN" and summed_on_ps.device == "/job:ps/task:0"
    assert summed_here.device == "/job:worker/task:0"
    assert summed_unplaced.device == ""
