"""scripts/benchmark.py run as a user runs it, on LeNet at batch 2: its three reports, its progress and its errors."""

import itertools
import json
import os
import re
import statistics
import subprocess
import sys

import matplotlib.image
import pytest
import tensorflow as tf

from script_runs import REPO_ROOT, check_ok, run_script, script_env
from slim_mp.devices import detect_device

BENCHMARK_SCRIPT = os.path.join(REPO_ROOT, "scripts", "benchmark.py")
ROUNDS = 2
BATCH_SIZE = 2
LABELS = {"float32", "slim_mp_bf16", "slim_mp_static_bf16", "grappler_bf16", "floor_bf16"}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One real benchmark of LeNet in float32 and bfloat16: (stdout, output dir, stderr)."""
    output_dir = str(tmp_path_factory.mktemp("benchmark"))
    process = check_ok(run_script(
        BENCHMARK_SCRIPT, "--models=lenet", "--precisions=bfloat16", f"--batch_size={BATCH_SIZE}",
        f"--rounds={ROUNDS}", "--warmup=1", "--memory_steps=1", f"--output_dir={output_dir}"))
    return process.stdout, output_dir, process.stderr


@pytest.fixture(scope="module")
def payload(tiny_run):
    with open(os.path.join(tiny_run[1], "benchmark.json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_json_has_every_configuration_with_positive_times(payload):
    results = payload["results"]
    assert {r["label"] for r in results} == LABELS and len(results) == len(LABELS)
    for row in results:
        assert len(row["step_seconds"]) == ROUNDS and min(row["step_seconds"]) > 0
        assert row["median_seconds"] == pytest.approx(statistics.median(row["step_seconds"]))
        assert row["images_per_second"] == pytest.approx(BATCH_SIZE / row["median_seconds"])
        assert row["speedup_vs_float32"] > 0
    by_label = {r["label"]: r for r in results}
    float32_times = by_label["float32"]["step_seconds"]
    for row in results:  # step_seconds are in round order, so round-by-round ratios can be recomputed here
        ratios = [base / own for base, own in zip(float32_times, row["step_seconds"])]
        assert row["speedup_vs_float32"] == pytest.approx(statistics.median(ratios))
    assert by_label["float32"]["speedup_vs_float32"] == 1.0
    assert by_label["float32"]["casts_executed"] == 0
    # The measured placement may keep LeNet float32 on this machine; the static one always converts.
    assert by_label["slim_mp_static_bf16"]["casts_in_graph"] > 0 and by_label["slim_mp_bf16"]["pass_seconds"] > 0
    # cold (the memory subprocess's first build) and warm (the timed build) pass times of both placements
    assert all(by_label[label]["cold_pass_seconds"] > 0 for label in ("slim_mp_bf16", "slim_mp_static_bf16"))
    assert by_label["float32"]["cold_pass_seconds"] is None and payload["batch_fits"] == []


def test_memory_is_measured_per_configuration_and_says_how(payload):
    for row in payload["results"]:
        assert row["peak_memory_bytes"] > 0
        assert row["peak_memory_bytes"] >= row["baseline_memory_bytes"] >= 0
    assert len(payload["memory_methods"]) == 1
    assert re.search("VmHWM|ru_maxrss|get_memory_info", payload["memory_methods"][0])


def test_markdown_has_one_row_per_model_and_configuration(tiny_run, payload):
    with open(os.path.join(tiny_run[1], "benchmark.md"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| model |"))
    table = itertools.takewhile(lambda line: line.startswith("|"), lines[header + 2:])
    rows = [line.strip("|").split("|") for line in table]
    assert sorted((r[0].strip(), r[1].strip()) for r in rows) == sorted(("lenet", label) for label in LABELS)
    assert all(len(r) == len(lines[header].strip("|").split("|")) for r in rows)


def test_chart_is_a_png_image(tiny_run):
    image = matplotlib.image.imread(os.path.join(tiny_run[1], "benchmark.png"))
    assert image.ndim == 3 and min(image.shape[:2]) > 100


def test_progress_names_model_configuration_and_round(tiny_run):
    stdout = tiny_run[0]
    for round_index in range(1, ROUNDS + 1):
        line = next(line for line in stdout.splitlines() if line.startswith(f"[lenet] round {round_index}/{ROUNDS}"))
        assert all(f"{label}=" in line for label in LABELS)
    assert all(f"[lenet] {label}: peak memory" in stdout for label in LABELS)


def test_tensorflows_python_lines_go_to_the_log_file_not_the_screen(tiny_run):
    stdout, output_dir, stderr = tiny_run
    # tf_slim logs this INFO line for every layer built with weight decay 0, as the benchmark's are.
    with open(os.path.join(output_dir, "tensorflow.log"), encoding="utf-8") as handle:
        assert "Scale of 0 disables regularizer" in handle.read()
    for screen in (stdout, stderr):
        assert "Scale of 0" not in screen and "UserWarning" not in screen
    assert f"TensorFlow's log: {os.path.join(output_dir, 'tensorflow.log')}" in stdout


def test_device_in_the_report_matches_detection_here(tiny_run, payload):
    device = detect_device()
    assert payload["device"] == device.as_json()
    assert payload["device"]["kind"] == ("GPU" if tf.config.list_physical_devices("GPU") else "CPU")
    assert f"device: {device.describe()}" in tiny_run[0]
    assert payload["precisions"] == ["bfloat16"]


def test_unknown_model_fails_with_one_error_line(tmp_path):
    process = run_script(BENCHMARK_SCRIPT, "--models=lenet,not_a_net", f"--output_dir={tmp_path}")
    assert process.returncode == 2
    errors = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not_a_net" in errors[0] and "models" in errors[0]
    assert "Traceback" not in process.stderr
    assert not os.listdir(tmp_path)


def test_a_negative_background_load_fails_with_one_error_line(tmp_path):
    process = run_script(BENCHMARK_SCRIPT, "--models=lenet", "--background_load=-1", f"--output_dir={tmp_path}")
    assert process.returncode == 2
    errors = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: --background_load=-1 is invalid; pass 0 (no load)")
    assert "Traceback" not in process.stderr
    assert not os.listdir(tmp_path)


@pytest.mark.slow
def test_background_load_decides_under_load_then_retimes_quietly(tmp_path):
    # Six memory subprocesses, each slowed by the load: more than run_script's timeout on a busy machine.
    process = check_ok(subprocess.run(
        [sys.executable, BENCHMARK_SCRIPT, "--models=lenet", "--precisions=bfloat16", f"--batch_size={BATCH_SIZE}",
         "--rounds=3", "--warmup=1", "--memory_steps=1", "--background_load=1", f"--output_dir={tmp_path}"],
        capture_output=True, text=True, env=script_env(), timeout=1200))
    with open(os.path.join(tmp_path, "benchmark.json"), encoding="utf-8") as handle:
        payload = json.load(handle)
    assert payload["background_load"] == 1
    (retiming,) = payload["quiet_retimings"]
    assert retiming["label"] == "slim_mp_bf16" and retiming["unavailable"] is None
    times = retiming["quiet_step_seconds"]
    assert retiming["quiet_ratio"] == pytest.approx(statistics.median(
        a / b for a, b in zip(times["slim_mp_bf16"], times["float32"])))
    assert os.path.isfile(retiming["decisions_file"])
    assert "background load: 1 busy-loop process(es)" in process.stdout and "background load stopped" in process.stdout
    assert "decided under load (1 busy process(es))" in process.stdout
    with open(os.path.join(tmp_path, "benchmark.md"), encoding="utf-8") as handle:
        assert "## Decided under load, re-timed quiet" in handle.read()
