"""scripts/benchmark.py --cluster run as a user runs it, on LeNet at batch 2: a parameter-server process on loopback
(and behind a shaped link where the machine allows it), its reports, and its flag errors."""

import json
import os
import re

import matplotlib.image
import pytest

from script_runs import REPO_ROOT, check_bad_input, check_ok, run_script
from slim_mp.measure.benchmark.shaped_link import namespace_exists

BENCHMARK_SCRIPT = os.path.join(REPO_ROOT, "scripts", "benchmark.py")
TINY = ("--models=lenet", "--precisions=bfloat16", "--batch_size=2", "--rounds=2", "--warmup=1")
LABELS = {"float32", "slim_mp_bf16", "ps_float32", "ps_slim_mp_bf16"}


def _run(output_dir: str, *cluster_flags: str):
    process = check_ok(run_script(BENCHMARK_SCRIPT, *TINY, *cluster_flags, f"--output_dir={output_dir}"))
    with open(os.path.join(output_dir, "benchmark.json"), encoding="utf-8") as handle:
        return process, json.load(handle)


@pytest.fixture(scope="module")
def loopback_run(tmp_path_factory):
    """One cluster benchmark of LeNet on loopback: (finished process, benchmark.json, output dir)."""
    output_dir = str(tmp_path_factory.mktemp("cluster_benchmark"))
    return (*_run(output_dir, "--cluster=loopback"), output_dir)


def test_every_configuration_is_timed_and_the_cluster_ones_cross_the_wire_both_ways(loopback_run):
    _, payload, _ = loopback_run
    results = {row["label"]: row for row in payload["results"]}
    assert set(results) == LABELS and payload["link"] == "loopback" and payload["link_gbits"] is None
    for label, row in results.items():
        assert row["unavailable"] is None and len(row["step_seconds"]) == 2 and row["median_seconds"] > 0
        assert row["fusions"], f"{label}: LeNet's convolutions and products fuse on every CPU"
        on_cluster = label.startswith("ps_")
        assert (row["layout"] == "cluster") is on_cluster
        if on_cluster:  # the weights come from the server, the gradients go to it
            assert row["sent_bytes"] > 0 and row["received_bytes"] > 0
            assert row["wire_bytes"] == row["sent_bytes"] + row["received_bytes"]
            assert {route["source_task"] for route in row["wire_routes"]} == {"/job:ps/replica:0/task:0",
                                                                           "/job:worker/replica:0/task:0"}
        else:
            assert row["sent_bytes"] is None and row["wire_routes"] == []
    # at least LeNet's largest weight, fc3's 7 * 7 * 64 x 1024 float32 values, is read from the server every step
    assert results["ps_float32"]["received_bytes"] >= 4 * 7 * 7 * 64 * 1024
    assert results["ps_float32"]["speedup_vs_float32"] == 1.0


def test_the_scaling_tables_are_computed_from_the_measured_steps_and_bytes(loopback_run):
    _, payload, _ = loopback_run
    rows = {row["label"]: row for row in payload["scaling"]}
    results = {row["label"]: row for row in payload["results"]}
    assert set(rows) == {"ps_float32", "ps_slim_mp_bf16"}
    for label, row in rows.items():
        load = row["load"]
        assert load["step_seconds"] == results[label[len("ps_"):]]["median_seconds"], "the one-process step"
        assert load["sent_bytes"] == results[label]["sent_bytes"]
        assert set(row["workers_per_link"]) == {"1", "10", "100"}
        assert row["workers_per_link"]["1"] <= row["workers_per_link"]["10"] <= row["workers_per_link"]["100"]


def test_markdown_and_chart(loopback_run):
    process, _, output_dir = loopback_run
    with open(os.path.join(output_dir, "benchmark.md"), encoding="utf-8") as handle:
        text = handle.read()
    for section in ("# slim_mp cluster benchmark", "## Speed-up kept, bytes on the wire", "## Fused kernels",
                    "## Past this machine, on paper", "| lenet | cluster | slim_mp_bf16 |"):
        assert section in text
    assert "MiB across the wire per step" in process.stdout and "parameter server: 127.0.0.1:" in process.stdout
    image = matplotlib.image.imread(os.path.join(output_dir, "benchmark.png"))
    assert image.ndim == 3 and min(image.shape[:2]) > 100


def test_a_shaped_link_runs_or_says_why_not_and_leaves_no_namespace(tmp_path):
    process, payload = _run(str(tmp_path), "--cluster=shaped", "--link_gbits=0.5")
    refused = [line for line in process.stdout.splitlines() if line.startswith("the machine refused a shaped link")]
    if refused:
        assert payload["link"] == "loopback" and payload["link_note"] in refused[0]
    else:
        assert payload["link"] == "shaped" and payload["link_gbits"] == 0.5
        assert "Gbit/s link (10.213." in process.stdout
        with open(os.path.join(tmp_path, "benchmark.md"), encoding="utf-8") as handle:
            assert "## The model against the 0.5 Gbit/s link" in handle.read()
        namespace = re.search(r"in namespace (slim_mp_link_\d+)\)", process.stdout).group(1)
        assert not namespace_exists(namespace), "the run removes its namespace (and the veth pair with it)"
    assert all(row["wire_bytes"] > 0 for row in payload["results"] if row["layout"] == "cluster")


@pytest.mark.parametrize("flags, expected", [
    (("--cluster=shaped",), "error: --cluster=shaped needs the link's bandwidth: pass --link_gbits"),
    (("--link_gbits=1",), "error: --link_gbits=1.0 shapes the link of --cluster=shaped only"),
    (("--cluster=shaped", "--link_gbits=0"), "error: --link_gbits=0.0 is not a positive bandwidth"),
    (("--cluster=loopback", "--background_load=1"), "error: --background_load=1 is not measured by --cluster=loopback"),
    (("--cluster=loopback", "--memory_budget_mb=100"), "error: --memory_budget_mb=100.0 is not measured by"),
    (("--cluster=ring",), "error: --cluster='ring' is not a layout; pass one of none, loopback, shaped"),
])
def test_cluster_flags_that_do_not_fit_are_one_error_line(flags, expected, tmp_path):
    check_bad_input(run_script(BENCHMARK_SCRIPT, "--models=lenet", *flags, f"--output_dir={tmp_path}"), expected)
    assert not os.listdir(tmp_path)
