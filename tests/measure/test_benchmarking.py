"""Pure helpers of the benchmark suite: device facts -> native precisions, variant planning, input checks, reports."""

import dataclasses
import json
import time

import matplotlib.image
import pytest
import tensorflow as tf
from graph_checks import live_bytes_per_step

from slim_mp.graph_pass.placement import TIMINGS_FILE_ENV
from slim_mp.measure.benchmark import benchmark_step, peak_memory
from slim_mp.measure.profiling.step_parallelism import executed_node_defs
from slim_mp.measure.benchmark import suite as benchmark_suite
from slim_mp.measure.benchmark.benchmark_report import BenchmarkReport
from slim_mp.measure.benchmark.suite import check_models, choose_precisions, plan_variants
from slim_mp.measure.benchmark.suite_results import Settings, SuiteRun, Variant, VariantResult
from slim_mp.devices import (
    LOW_PRECISION_CPU_FLAGS,
    DeviceInfo,
    detect_device,
    native_precisions,
    precision_support,
)


def cpu(*flags: str) -> DeviceInfo:
    return DeviceInfo("CPU", "test CPU", cpu_flags=frozenset(flags))


def gpu(major: int, minor: int) -> DeviceInfo:
    return DeviceInfo("GPU", "test GPU", compute_capability=(major, minor))


# Expected answers written from the rules: bfloat16 native with avx512_bf16/amx_bf16 or compute
# capability >= 8.0; float16 native only on GPUs with compute capability >= 7.0.
@pytest.mark.parametrize("device, bfloat16_native, float16_native", [
    (cpu(), False, False),
    (cpu("avx512_bf16"), True, False),
    (cpu("amx_bf16"), True, False),
    (cpu("avx512_bf16", "amx_bf16", "amx_fp16", "avx512_fp16"), True, False),
    (cpu("avx512_fp16", "amx_fp16"), False, False),
    (dataclasses.replace(cpu("avx512_bf16", "amx_bf16"), onednn=False), False, False),
    (gpu(6, 1), False, False),
    (gpu(7, 0), False, True),
    (gpu(7, 5), False, True),
    (gpu(8, 0), True, True),
    (gpu(8, 9), True, True),
    (gpu(9, 0), True, True),
    (gpu(12, 0), True, True),
])
def test_native_precisions_follow_the_device_facts(device, bfloat16_native, float16_native):
    support = precision_support(device)
    assert support["bfloat16"].native is bfloat16_native
    assert support["float16"].native is float16_native
    for item in support.values():
        assert item.reason.startswith("emulated") is not item.native
    expected = [name for name, native in (("bfloat16", bfloat16_native), ("float16", float16_native)) if native]
    assert native_precisions(device) == expected


@pytest.mark.executed_ops
def test_bfloat16_instructions_without_onednn_are_emulated_and_say_how_to_turn_it_on():
    support = precision_support(dataclasses.replace(cpu("avx512_bf16"), onednn=False))["bfloat16"]
    assert "avx512_bf16" in support.reason and "TF_ENABLE_ONEDNN_OPTS=0" in support.reason


def test_the_device_line_and_so_the_timing_cache_key_differ_with_onednn():
    on, off = cpu("avx512_bf16"), dataclasses.replace(cpu("avx512_bf16"), onednn=False)
    assert "oneDNN on" in on.describe() and "oneDNN off" in off.describe()


@pytest.mark.executed_ops
def test_detected_onednn_state_is_what_tensorflow_executes():
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, [1, 8, 8, 3])
        output = tf.nn.conv2d(images, tf.ones([3, 3, 3, 4]), 1, "SAME")
        metadata = tf.compat.v1.RunMetadata()
        with tf.compat.v1.Session() as session:
            session.run(output, {images: [[[[1.0] * 3] * 8] * 8]},
                        options=tf.compat.v1.RunOptions(output_partition_graphs=True), run_metadata=metadata)
    kernel = executed_node_defs(metadata)[output.op.name].op
    assert detect_device().onednn is kernel.startswith("_Mkl"), kernel


def test_float16_on_a_cpu_is_reported_as_emulated():
    assert "emulated" in precision_support(cpu("avx512_bf16"))["float16"].describe()


@pytest.mark.parametrize("kwargs, argument", [
    ({"kind": "TPU", "name": "x"}, "kind"),
    ({"kind": "GPU", "name": "x"}, "compute_capability"),
])
def test_device_info_rejects_incomplete_facts(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        DeviceInfo(**kwargs)


def test_detect_device_agrees_with_tensorflow_and_cpuinfo():
    device = detect_device()
    has_gpu = bool(tf.config.list_physical_devices("GPU"))
    assert device.kind == ("GPU" if has_gpu else "CPU")
    if not has_gpu:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            words = set(handle.read().split())
        assert device.cpu_flags == words.intersection(LOW_PRECISION_CPU_FLAGS)
    assert json.loads(json.dumps(device.as_json()))["kind"] == device.kind


def test_default_precisions_are_the_native_ones_and_none_native_is_an_error():
    assert choose_precisions([], gpu(8, 0)) == ["bfloat16", "float16"]
    assert choose_precisions([], cpu("amx_bf16")) == ["bfloat16"]
    with pytest.raises(ValueError, match="--precisions"):
        choose_precisions([], cpu())


def test_asked_for_precisions_run_even_when_emulated_and_aliases_collapse():
    assert choose_precisions(["fp16", "float16", "bf16"], cpu()) == ["float16", "bfloat16"]
    with pytest.raises(ValueError, match="precisions has 'float8'"):
        choose_precisions(["float8"], cpu())


def test_plan_has_float32_first_then_every_config_per_precision():
    variants, skipped = plan_variants(["bfloat16"], cpu("avx512_bf16"))
    assert [v.label for v in variants] == ["float32", "slim_mp_bf16", "slim_mp_static_bf16", "grappler_bf16",
                                           "floor_bf16"]
    assert skipped == []


def test_plan_on_a_gpu_leaves_out_grappler_bfloat16_with_a_reason():
    variants, skipped = plan_variants(["bfloat16", "float16"], gpu(9, 0))
    labels = [v.label for v in variants]
    assert "grappler_bf16" not in labels and "grappler_fp16" in labels
    assert len(labels) == 8
    assert len(skipped) == 1 and skipped[0].startswith("grappler_bf16")


@pytest.mark.parametrize("field, value", [
    ("batch_size", 0), ("rounds", 0), ("warmup", -1), ("memory_steps", 0), ("image_size", 0), ("batch_size", 2.5),
])
def test_settings_name_the_bad_argument(field, value):
    values = {"batch_size": 2, "image_size": None, "rounds": 2, "warmup": 1, "memory_steps": 1, field: value}
    with pytest.raises(ValueError, match=f"^{field}="):
        Settings(**values)


def test_check_models_names_the_unknown_model():
    assert check_models(["lenet", "cifarnet"]) == ["lenet", "cifarnet"]
    with pytest.raises(ValueError, match="models: .*'lenett'.*did you mean 'lenet'"):
        check_models(["lenet", "lenett"])
    with pytest.raises(ValueError, match="models is empty"):
        check_models([])


@pytest.mark.executed_ops
def test_the_benchmark_step_keeps_no_copy_of_the_momentum_slots_as_the_training_step():
    step = benchmark_step.build_benchmark_step("float32", "lenet", tf.float32, 2, None, num_classes=10)
    step.session.close()
    with step.train_op.graph.as_default():
        slot_set = sum(4 * v.shape.num_elements() for v in tf.compat.v1.trainable_variables())
    first, second = live_bytes_per_step(step.train_op)
    assert first - second < slot_set // 2


def test_interleaved_times_are_seconds_of_each_call_in_rotating_order():
    calls = []

    def run(name, seconds):
        return lambda: (calls.append(name), time.sleep(seconds))

    times = benchmark_step.interleaved_times({"a": run("a", 0.02), "b": run("b", 0.0)}, rounds=2, warmup=1)
    assert calls == ["a", "b", "a", "b", "b", "a"]  # warm-up, round 1 (a first), round 2 (b first)
    assert len(times["a"]) == len(times["b"]) == 2 and min(times["a"]) >= 0.02


def test_an_error_in_a_timed_round_reaches_the_caller():
    calls = []

    def fails_on_the_third_call():
        calls.append(1)
        if len(calls) == 3:
            raise tf.errors.InvalidArgumentError(None, None, "the op's own error")

    with pytest.raises(tf.errors.InvalidArgumentError, match="the op's own error"):
        benchmark_step.interleaved_times({"a": fails_on_the_third_call}, rounds=3, warmup=1)


def result(label: str, config: str, precision: str, native: bool, seconds: float, speedup: float) -> VariantResult:
    return VariantResult(
        model="toy", label=label, config=config, precision=precision, native=native, median_seconds=seconds,
        images_per_second=4 / seconds, speedup_vs_float32=speedup, step_seconds=(seconds,), casts_executed=3,
        casts_in_graph=2, pass_seconds=0.5 if config == "slim_mp" else None, peak_memory_bytes=3 * 2 ** 20,
        baseline_memory_bytes=2 ** 20, memory_method="test method")


@pytest.fixture
def toy_run() -> SuiteRun:
    device = cpu()
    return SuiteRun(
        device=device, support=precision_support(device), settings=Settings(4, None, 1, 0),
        precisions=("float16",), skipped=("grappler_fp16: a test note",),
        results=(result("float32", "float32", "float32", True, 0.2, 1.0),
                 result("slim_mp_fp16", "slim_mp", "float16", False, 0.1, 2.0)))


def test_markdown_has_one_row_per_result_and_marks_emulated_precisions(toy_run):
    text = BenchmarkReport(toy_run).to_markdown()
    rows = [line for line in text.splitlines() if line.startswith("| toy |")]
    assert len(rows) == 2
    cells = [cell.strip() for cell in rows[1].strip("|").split("|")]
    assert cells[:6] == ["toy", "slim_mp_fp16", "float16 (emulated)", "100.0", "40.0", "2.00x"]
    assert cells[6:8] == ["3.0", "2.0"]  # 3 MiB peak, 1 MiB baseline
    assert "Left out: grappler_fp16: a test note." in text
    assert "test method" in text


def test_the_fusion_table_names_what_float32_fused_more_of(toy_run):
    float32, low = toy_run.results
    run = dataclasses.replace(toy_run, results=(
        dataclasses.replace(float32, fusions=(("_FusedBatchNormEx", 3), ("_FusedConv2D", 2))),
        dataclasses.replace(low, fusions=(("_FusedConv2D", 2),))))
    rows = [line for line in BenchmarkReport(run).to_markdown().splitlines() if line.startswith("| toy |")]
    assert rows[-2:] == ["| toy | float32 | _FusedBatchNormEx x3, _FusedConv2D x2 | - |",
                         "| toy | slim_mp_fp16 | _FusedConv2D x2 | _FusedBatchNormEx (0 vs 3) |"]
    assert "## Fused kernels" not in BenchmarkReport(toy_run).to_markdown(), "no table when nothing fused"


def test_reports_are_written_and_parse(toy_run, tmp_path):
    paths = BenchmarkReport(toy_run).write_reports(str(tmp_path / "out"))
    with open(paths["json"], encoding="utf-8") as handle:
        payload = json.load(handle)
    assert [r["label"] for r in payload["results"]] == ["float32", "slim_mp_fp16"]
    assert payload["precision_support"]["float16"]["native"] is False
    image = matplotlib.image.imread(paths["png"])
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def test_unavailable_variant_is_a_row_with_its_reason(toy_run, tmp_path):
    floor = benchmark_suite.unavailable_result(
        "toy", Variant("floor", "float16"), False, "No registered 'LRN' OpKernel for bfloat16")
    run = dataclasses.replace(toy_run, results=toy_run.results + (floor,))
    rows = [line for line in BenchmarkReport(run).to_markdown().splitlines() if line.startswith("| toy | floor")]
    assert len(rows) == 1 and "n/a: No registered 'LRN' OpKernel for bfloat16" in rows[0]
    paths = BenchmarkReport(run).write_reports(str(tmp_path))
    with open(paths["json"], encoding="utf-8") as handle:
        assert json.load(handle)["results"][-1]["unavailable"].startswith("No registered 'LRN'")


def test_failure_reason_is_the_line_naming_the_error():
    error = RuntimeError("The memory measurement failed (exit status 1):\nTraceback (most recent call last):\n"
                         "  File \"x.py\", line 3\n"
                         "tensorflow.python.framework.errors_impl.NotFoundError: no LRN kernel\n")
    assert benchmark_suite.failure_reason(error) == (
        "tensorflow.python.framework.errors_impl.NotFoundError: no LRN kernel")
    assert benchmark_suite.failure_reason(ValueError("plain message")) == "plain message"


def test_a_variant_that_cannot_run_is_reported_and_the_others_are_timed():
    # cifarnet's LRN has no bfloat16 CPU kernel: the all-low floor fails at its first run.
    variants = [Variant("float32", "float32"), Variant("floor", "bfloat16")]
    memory = {v.label: peak_memory.MemoryMeasurement(1, 0, "test") for v in variants}
    support = precision_support(cpu("avx512_bf16"))
    results = benchmark_suite.benchmark_model("cifarnet", variants, Settings(2, None, 1, 0), support, memory,
                                              progress=lambda line: None)
    by_label = {r.label: r for r in results}
    assert by_label["float32"].unavailable is None and by_label["float32"].median_seconds > 0
    assert dict(by_label["float32"].fusions)["_FusedConv2D"] == 2, "conv + bias + relu, fused by grappler on any CPU"
    assert by_label["floor_bf16"].median_seconds is None
    assert "LRN" in by_label["floor_bf16"].unavailable


@pytest.mark.parametrize("timings_file, subprocesses", [("fixed.json", 3), (None, 4)])
def test_a_measured_placement_fills_its_cache_first_unless_its_timings_are_fixed(
        timings_file, subprocesses, monkeypatch):
    # float32 and slim_mp_static: one subprocess each; slim_mp: one more to fill the timing cache,
    # which fixed timings never touch.
    monkeypatch.delenv(TIMINGS_FILE_ENV, raising=False)
    if timings_file:
        monkeypatch.setenv(TIMINGS_FILE_ENV, timings_file)
    requests = []
    monkeypatch.setattr(peak_memory, "measure_in_subprocess",
                        lambda request: requests.append(request.config) or peak_memory.MemoryMeasurement(2, 1, "t"))
    variants = [Variant("float32", "float32"), Variant("slim_mp", "bfloat16"), Variant("slim_mp_static", "bfloat16")]
    failures = {}
    memory = benchmark_suite._measure_memory("lenet", variants, Settings(2, None, 1, 0), lambda line: None, failures)
    assert set(memory) == {v.label for v in variants} and failures == {}
    assert len(requests) == subprocesses
    assert requests.count("slim_mp") == (1 if timings_file else 2)


def test_the_memory_subprocess_gets_the_checkout_on_its_path_not_the_package_folder():
    # The subprocess imports slim_mp and nets: its path needs the folder that holds both.
    import os

    root = peak_memory._REPO_ROOT
    assert os.path.isfile(os.path.join(root, "slim_mp", "__init__.py"))
    assert os.path.isdir(os.path.join(root, "nets"))
