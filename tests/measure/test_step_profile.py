"""The step profiler: op times and work from TensorFlow's step stats, live tensors at the peak, the script's reports.

Expected values are computed by hand from the shapes (multiply-adds of a convolution, bytes of a
tensor), never by the profiler.
"""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from script_runs import REPO_ROOT, check_ok, run_script
from slim_mp.measure.profiling.profile_report import compare_profiles
from slim_mp.measure.profiling.step_profile import StepProfile, profile_interleaved, profile_session_step
from slim_mp.op_families import op_family

tf1 = tf.compat.v1
pytestmark = pytest.mark.executed_ops
PROFILE_SCRIPT = os.path.join(REPO_ROOT, "scripts", "profile_step.py")

BATCH, SIZE, IN_CHANNELS, OUT_CHANNELS, KERNEL = 2, 8, 3, 4, 3
UNITS = 5


def _conv_matmul_step():
    """A conv (SAME, stride 1) + dense train step of known shapes, and its session."""
    graph = tf.Graph()
    with graph.as_default():
        rng = np.random.RandomState(0)
        images = tf.constant(rng.uniform(-1, 1, (BATCH, SIZE, SIZE, IN_CHANNELS)).astype(np.float32))
        kernel = tf1.get_variable("kernel", (KERNEL, KERNEL, IN_CHANNELS, OUT_CHANNELS))
        dense = tf1.get_variable("dense", (SIZE * SIZE * OUT_CHANNELS, UNITS))
        features = tf.reshape(tf.nn.conv2d(images, kernel, strides=1, padding="SAME"), [BATCH, -1])
        halved = tf.cast(tf.cast(features, tf.bfloat16), tf.float32)
        loss = tf.reduce_sum(tf.matmul(halved, dense) ** 2)
        train_op = tf1.train.GradientDescentOptimizer(0.0).minimize(loss)
        session = tf1.Session(graph=graph)
        session.run(tf1.global_variables_initializer())
    return session, train_op


@pytest.fixture(scope="module")
def profile() -> StepProfile:
    session, train_op = _conv_matmul_step()
    with session:
        return profile_session_step(session, train_op, "float32", traced_steps=2, timed_steps=2, warmup_steps=1)


def test_every_convolution_and_product_does_the_work_its_shapes_say(profile):
    conv_flops = 2 * BATCH * SIZE * SIZE * OUT_CHANNELS * KERNEL * KERNEL * IN_CHANNELS
    matmul_flops = 2 * BATCH * (SIZE * SIZE * OUT_CHANNELS) * UNITS
    counted = {}
    for op in profile.ops:
        if op.flops:
            counted.setdefault(op.op_type, []).append(op.flops)
    # the images are a constant: no gradient of the input; the product's forward, gradient of its
    # input (transposed) and of its weights do the same work each
    assert {name: sorted(flops) for name, flops in counted.items()} == {
        "Conv2D": [conv_flops], "Conv2DBackpropFilter": [conv_flops], "MatMul": [matmul_flops] * 3}, counted


def test_each_op_is_reported_by_its_family_beside_the_kernel_that_ran(profile):
    assert all(op.op_type == op_family(op.kernel) for op in profile.ops)
    assert {"Conv2D", "Conv2DBackpropFilter", "MatMul", "Cast"} <= set(profile.by_type())


def test_times_and_casts_are_those_of_the_executed_ops(profile):
    assert all(op.micros >= 0 for op in profile.ops)
    assert profile.step_ms > 0 and profile.op_ms > 0
    count, _ = profile.casts()
    # float32 -> bfloat16 -> float32 forward, and the gradient of each Cast is a Cast back
    assert count == 4


def test_the_traced_critical_path_is_at_least_the_slowest_op_and_at_most_the_span(profile):
    figures = profile.parallelism
    # the slowest op alone is a chain; a chain's ops run one after another inside the step
    assert max(op.micros for op in profile.ops) / 1e3 <= figures.critical_path_ms <= figures.span_ms
    assert figures.available_parallelism >= figures.parallelism > 0
    assert figures.data_critical_path_ms <= figures.critical_path_ms  # fewer edges, no longer a chain
    assert figures.critical_path_ops >= 2


def test_the_peak_holds_the_bfloat16_copy_beside_its_float32_source():
    graph = tf.Graph()
    with graph.as_default():
        source = tf.random.uniform([512, 512])  # 1 MiB of float32
        low = tf.cast(source, tf.bfloat16)  # 0.5 MiB
        total = tf.reduce_sum(source) + tf.reduce_sum(tf.cast(low, tf.float32))
        with tf1.Session(graph=graph) as session:
            profiled = profile_session_step(session, total, "mixed", traced_steps=1, timed_steps=1, warmup_steps=0)
    by_dtype = profiled.live_bytes_by_dtype()
    assert by_dtype.get("bfloat16", 0) >= 512 * 512 * 2, by_dtype
    assert by_dtype.get("float32", 0) >= 512 * 512 * 4, by_dtype
    assert profiled.peak_live_bytes == sum(tensor.bytes for tensor in profiled.live_at_peak)


def _summed_session(build):
    graph = tf.Graph()
    with graph.as_default():
        fetch = tf.reduce_sum(build(tf.random.uniform([16, 16])))
    return tf1.Session(graph=graph), fetch


def test_steps_profiled_taking_turns_each_keep_their_own_ops_and_label():
    (product_session, product_fetch), (conv_session, conv_fetch) = (
        _summed_session(lambda x: tf.matmul(x, x)),
        _summed_session(lambda x: tf.nn.conv2d(x[None, :, :, None], tf.ones([3, 3, 1, 2]), 1, "SAME")))
    with product_session, conv_session:
        product, convolution = profile_interleaved(
            [(product_session, product_fetch, "product"), (conv_session, conv_fetch, "convolution")],
            traced_steps=2, timed_steps=1, warmup_steps=0)
    assert (product.label, convolution.label) == ("product", "convolution")
    assert "MatMul" in product.by_type() and "Conv2D" not in product.by_type()
    assert "Conv2D" in convolution.by_type() and "MatMul" not in convolution.by_type()
    assert product.parallelism is not None and convolution.parallelism is not None


def test_the_last_traced_step_is_kept_as_a_chrome_trace_of_the_ops_that_ran(profile):
    events = json.loads(profile.chrome_trace)["traceEvents"]
    # TensorFlow's timeline: one complete event ("X") per op run, named after the op, with its start and duration.
    ran = {event["args"]["name"] for event in events if event.get("ph") == "X"}
    assert {op.name for op in profile.ops} <= ran
    assert all(event["dur"] >= 0 for event in events if event.get("ph") == "X")


def test_comparison_reports_time_lost_as_negative_savings(profile):
    slower = StepProfile("bfloat16", profile.step_ms, [dataclasses.replace(op, micros=op.micros * 2)
                                                        for op in profile.ops], 0, [])
    rows = {row.op_type: row for row in compare_profiles(profile, slower)}
    heaviest = max(rows.values(), key=lambda row: row.float32_ms)
    assert heaviest.saved_ms == pytest.approx(-heaviest.float32_ms)
    assert heaviest.speedup == pytest.approx(0.5)


@pytest.mark.slow
def test_profile_script_writes_text_json_and_plot_for_a_training_config(tmp_path):
    output_dir = str(tmp_path / "profile")
    process = check_ok(run_script(
        PROFILE_SCRIPT, "--model_name=lenet", "--dataset_name=fashion_mnist", "--batch_size=4",
        "--precision=bfloat16", "--mp_placement=static", "--optimizer=sgd", "--learning_rate_decay_type=fixed",
        "--profile_warmup_steps=0", "--profile_timed_steps=1", "--profile_traced_steps=1",
        f"--output_dir={output_dir}",
    ))
    assert "wrote" in process.stdout
    with open(os.path.join(output_dir, "profile.json"), encoding="utf-8") as handle:
        report = json.load(handle)
    mixed_types = {op["dtype"] for op in report["mixed"]["ops"] if op["flops"]}
    assert "bfloat16" in mixed_types  # the static painting lowers LeNet's convolutions
    assert {op["dtype"] for op in report["float32"]["ops"] if op["flops"]} == {"float32"}
    assert report["mixed"]["casts"] > 0 and report["float32"]["casts"] == 0
    with open(os.path.join(output_dir, "profile.md"), encoding="utf-8") as handle:
        text = handle.read()
    assert "## Time per op type" in text and "Conv2DBackpropFilter" in text
    assert "## Parallelism and the critical path" in text
    assert report["mixed"]["parallelism"]["critical_path_ms"] <= report["mixed"]["parallelism"]["span_ms"]
    assert os.path.getsize(os.path.join(output_dir, "profile.png")) > 10_000
    for label, low_ops in (("float32", False), ("bfloat16", True)):
        with open(os.path.join(output_dir, f"trace_{label}.json"), encoding="utf-8") as handle:
            events = json.load(handle)["traceEvents"]
        names = {event.get("args", {}).get("name", "") for event in events}
        assert any(name.endswith("_bf16") for name in names) == low_ops, label


def test_profile_script_refuses_float32_with_one_error_line(tmp_path):
    process = run_script(PROFILE_SCRIPT, "--model_name=lenet", "--dataset_name=fashion_mnist", "--precision=float32",
                         f"--output_dir={tmp_path}")
    assert process.returncode == 2, process.stderr[-2000:]
    assert process.stderr.strip().splitlines()[-1].startswith("error: --precision=float32")
