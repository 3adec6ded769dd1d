"""The benchmark's background load (always stopped) and the quiet re-timing of a placement decided under it."""

import os
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from slim_mp.devices import DeviceInfo
from slim_mp.graph_pass import PlacementFiles, PlacementOptions
from slim_mp.measure.benchmark import under_load
from slim_mp.measure.benchmark import benchmark_step
from slim_mp.measure.benchmark import suite as benchmark_suite
from slim_mp.measure.benchmark.benchmark_report import BenchmarkReport
from slim_mp.measure.benchmark.suite_results import Settings, SuiteRun, VariantResult
from slim_mp.devices import precision_support


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for a parent that will not reap it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _busy_children():
    """Process ids of this process's children running the busy loop."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if parent == os.getpid() and b"getppid" in command:
            found.append(int(entry))
    return found


def _wait_until_gone(pids, seconds=10.0):
    deadline = time.monotonic() + seconds
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if _alive(pid)]


def test_the_load_runs_inside_the_block_pinned_and_is_stopped_after_an_error():
    load = under_load.BackgroundLoad(1)
    assert load.pids == [] and not _busy_children(), "nothing starts before the block"
    with pytest.raises(RuntimeError, match="the benchmark failed"):
        with load:
            pids = load.pids
            assert len(pids) == 1 and _alive(pids[0]) and pids == _busy_children()
            assert len(os.sched_getaffinity(pids[0])) == 1, "pinned to one core"
            raise RuntimeError("the benchmark failed")
    assert not any(_alive(pid) for pid in pids) and not _busy_children() and load.pids == []


def test_run_suite_stops_its_load_when_the_benchmark_fails(tmp_path):
    seen = []

    def failing_progress(line):
        seen.append(_busy_children())
        raise KeyboardInterrupt  # as Ctrl-C would, at the first progress line

    with pytest.raises(KeyboardInterrupt):
        benchmark_suite.run_suite(["lenet"], ["bfloat16"], Settings(2, None, 1, 0), DeviceInfo("CPU", "test CPU"),
                                  failing_progress, background_load=1, decisions_dir=str(tmp_path))
    assert len(seen) == 1 and len(seen[0]) == 1, "the load ran while the benchmark did"
    assert not any(_alive(pid) for pid in seen[0]) and not _busy_children()


def test_a_loop_whose_parent_dies_stops_by_itself():
    # The parent starts a loop and exits without stopping it (as a SIGKILLed benchmark would).
    start = ("import os, subprocess, sys\n"
             f"loop = subprocess.Popen([sys.executable, '-c', {under_load._BUSY_LOOP!r}, str(os.getpid())],"
             " stdout=subprocess.DEVNULL)\nprint(loop.pid)")
    parent = subprocess.run([sys.executable, "-c", start], capture_output=True, text=True, check=True, timeout=60)
    left = _wait_until_gone([int(parent.stdout)])
    for pid in left:  # do not leave a failed test's loop spinning
        os.kill(pid, signal.SIGKILL)
    assert left == []


@pytest.mark.parametrize("value", [-1, 3, True, 1.5])
def test_a_bad_background_load_names_the_flag(value):
    with pytest.raises(ValueError, match=rf"^--background_load={value!r} is invalid; pass 0 \(no load\) or .*: 1 to 2"):
        under_load.check_background_load(value, cores=2)
    assert under_load.check_background_load(2, cores=2) == 2


def _result(label, config, precision, step_seconds):
    return VariantResult(
        model="lenet", label=label, config=config, precision=precision, native=True, median_seconds=1.0,
        images_per_second=1.0, speedup_vs_float32=1.0, step_seconds=step_seconds, casts_executed=0,
        casts_in_graph=0, pass_seconds=None, peak_memory_bytes=1, baseline_memory_bytes=0, memory_method="test")


def test_the_quiet_retiming_rebuilds_the_pinned_placement_beside_float32(tmp_path):
    path = under_load.decisions_path(str(tmp_path), "lenet", "slim_mp_bf16")
    decided = benchmark_step.build_benchmark_step("slim_mp", "lenet", tf.bfloat16, 2, None,
                                                  placement_options=PlacementOptions(PlacementFiles(decisions_file=path)))
    decided.session.close()
    # Under load: per-round slim_mp/float32 ratios 2, 4, 2 -> 2.
    low = _result("slim_mp_bf16", "slim_mp", "bfloat16", (2.0, 4.0, 6.0))
    float32 = _result("float32", "float32", "float32", (1.0, 1.0, 3.0))
    retiming = under_load.retime_quietly(low, float32, str(tmp_path), 1, 2, None, rounds=3, warmup=1,
                                             progress=lambda line: None)
    assert retiming.unavailable is None and retiming.loaded_ratio == pytest.approx(2.0)
    assert (retiming.float32_ops, retiming.low_ops) == (len(decided.placement.float32_ops),
                                                         len(decided.placement.low_ops))
    times = retiming.quiet_step_seconds
    assert len(times["float32"]) == len(times["slim_mp_bf16"]) == 3
    assert retiming.quiet_ratio == pytest.approx(sorted(a / b for a, b in zip(times["slim_mp_bf16"],
                                                                                times["float32"]))[1])
    missing = under_load.retime_quietly(low, float32, str(tmp_path / "none"), 1, 2, None, 1, 0, print)
    assert missing.unavailable == "no placement was decided under load"

    device = DeviceInfo("CPU", "test CPU")
    run = SuiteRun(device, precision_support(device), Settings(2, None, 3, 1), ("bfloat16",), (), (float32, low),
                   background_load=1, quiet_retimings=(retiming, missing))
    text = BenchmarkReport(run).to_markdown()
    assert "## Decided under load, re-timed quiet" in text and "beside 1 busy-loop process(es)" in text
    rows = [line for line in text.splitlines() if line.startswith("| lenet | slim_mp_bf16 |")]
    assert len(rows) == 3 and f"| {retiming.quiet_ratio:.3f} |" in rows[1] and "n/a: no placement" in rows[2]
    assert BenchmarkReport(run).to_dict()["quiet_retimings"][0]["quiet_ratio"] == retiming.quiet_ratio
    (line, skipped) = under_load.summary_lines(run.quiet_retimings)
    assert "decided under load (1 busy process(es))" in line and "slim_mp/float32 under load 2.000" in line
