"""The largest batch within a memory budget: the search's contract, its report table, cold and warm pass times.

The contract: the batch returned fits the budget and the next batch, also measured, does not. It is
checked on a made-up memory model (peaks known in closed form) and, slow, on LeNet's real peaks
measured in subprocesses.
"""

import dataclasses
import subprocess
import sys

import pytest

from slim_mp.devices import DeviceInfo, precision_support
from slim_mp.measure.benchmark import peak_memory
from slim_mp.measure.benchmark import suite as benchmark_suite
from slim_mp.measure.benchmark.batch_budget import MIB, largest_batch_within
from slim_mp.measure.benchmark.benchmark_report import BenchmarkReport
from slim_mp.measure.benchmark.suite_results import BatchFit, Settings, SuiteRun, Variant, VariantResult
from slim_mp.graph_pass.placement.options import TIMINGS_FILE_ENV
from script_runs import script_env


def linear_peaks(fixed_mib: float, per_image_mib: float, calls: list):
    """A memory model: ``fixed + per_image * batch`` MiB above baseline; every batch asked is appended to ``calls``."""
    def bytes_above_baseline(batch: int) -> int:
        calls.append(batch)
        return int((fixed_mib + per_image_mib * batch) * MIB)
    return bytes_above_baseline


def assert_contract(fit: BatchFit) -> None:
    assert fit.peak_of(fit.largest_batch) <= fit.budget_bytes
    assert fit.first_over == fit.largest_batch + 1
    assert fit.peak_of(fit.largest_batch + 1) > fit.budget_bytes


@pytest.mark.parametrize("budget_mb, expected", [(175, 7), (110, 1), (100 + 10 * 300 + 5, 300), (130, 3)])
def test_the_largest_batch_fits_and_one_more_does_not(budget_mb, expected):
    calls = []
    fit = largest_batch_within("toy", "float32", budget_mb, linear_peaks(100, 10, calls))
    assert fit.largest_batch == expected  # 100 + 10 * batch <= budget, by hand
    assert_contract(fit)
    # doubling then bisection: each batch measured once, about twice log2 of the answer in all
    assert len(calls) == len(set(calls)) <= 2 * (expected.bit_length() + 1)
    assert calls[:2] == [1, 2]


def test_no_batch_fits_when_batch_one_is_over_and_the_limit_stops_the_search():
    calls = []
    fit = largest_batch_within("toy", "float32", 50, linear_peaks(100, 10, calls))
    assert fit.largest_batch is None and calls == [1] and fit.first_over == 1
    capped = largest_batch_within("toy", "float32", 10 ** 6, linear_peaks(1, 1, []), max_batch=12)
    assert capped.largest_batch == 12 and capped.first_over is None
    assert [batch for batch, _ in capped.peaks] == [1, 2, 4, 8, 12]


def test_a_measuring_subprocess_reads_its_own_peak_not_its_parents():
    """Linux keeps ``ru_maxrss`` across fork and exec: a measuring subprocess started by a process
    holding an extra GiB would report that GiB as its own baseline and peak (0 above baseline)."""
    held = bytearray(1 << 30)
    held[::4096] = b"\1" * len(held[::4096])  # every page resident
    parent_peak, method = peak_memory.peak_rss()
    child = subprocess.run(
        [sys.executable, "-c", "from slim_mp.measure.benchmark.peak_memory import peak_rss; print(peak_rss()[0])"],
        capture_output=True, text=True, env=script_env(), check=True, timeout=120)
    del held
    assert int(child.stdout.split()[-1]) < parent_peak - (1 << 29)  # the child never held the parent's GiB
    assert method == peak_memory.RSS_METHOD  # Linux: the high-water mark of /proc/self/status


@pytest.mark.parametrize("budget", [0, -5, float("nan"), "big", True])
def test_a_bad_budget_names_the_flag(budget):
    with pytest.raises(ValueError, match=r"--memory_budget_mb=.* is not a positive number of MiB"):
        largest_batch_within("toy", "float32", budget, linear_peaks(1, 1, []))
    with pytest.raises(ValueError, match=r"--memory_budget_mb="):
        Settings(2, None, 1, 0, memory_budget_mb=budget)


def _result(label: str, config: str, cold, warm) -> VariantResult:
    return VariantResult(
        model="toy", label=label, config=config, precision="bfloat16", native=True, median_seconds=0.1,
        images_per_second=20.0, speedup_vs_float32=1.0, step_seconds=(0.1,), casts_executed=0, casts_in_graph=0,
        pass_seconds=warm, peak_memory_bytes=2 * MIB, baseline_memory_bytes=MIB, memory_method="test",
        cold_pass_seconds=cold)


def test_the_report_shows_cold_and_warm_pass_times_and_the_budget_table():
    device = DeviceInfo("CPU", "test CPU", cpu_flags=frozenset({"avx512_bf16"}))
    fits = (largest_batch_within("toy", "float32", 175, linear_peaks(100, 10, [])),
            largest_batch_within("toy", "slim_mp_bf16", 175, linear_peaks(100, 5, [])),
            BatchFit("toy", "slim_mp_fp16", 175 * MIB, None, (), 1024, unavailable="no kernel"))
    run = SuiteRun(device, precision_support(device), Settings(2, None, 1, 0, memory_budget_mb=175),
                   ("bfloat16",), (), (_result("float32", "float32", None, None),
                                      _result("slim_mp_bf16", "slim_mp", 12.5, 0.25)), batch_fits=fits)
    lines = BenchmarkReport(run).to_markdown().splitlines()
    budget_start = lines.index("## Largest batch within 175 MiB")

    def cells_of(part):
        return [[cell.strip() for cell in line.strip("|").split("|")] for line in part if line.startswith("| toy |")]

    assert "pass (s) cold / warm" in next(line for line in lines if line.startswith("| model | config | precision"))
    assert [row[-1] for row in cells_of(lines[:budget_start])] == ["-", "12.50 / 0.25"]
    cells = cells_of(lines[budget_start:])
    assert cells[0][:6] == ["toy", "float32", "7", "170.0", "8", "180.0"]
    assert cells[1][:6] == ["toy", "slim_mp_bf16", "15", "175.0", "16", "180.0"]
    assert cells[2][2] == "n/a: no kernel"
    assert BenchmarkReport(run).to_dict()["batch_fits"][0]["largest_batch"] == 7


def test_the_cold_pass_is_the_first_build_in_the_runs_own_cache_folder(monkeypatch):
    monkeypatch.delenv(TIMINGS_FILE_ENV, raising=False)
    requests = []

    def measure(request):
        requests.append(request)
        cold = sum(r.config == request.config for r in requests) == 1
        return peak_memory.MemoryMeasurement(2, 1, "t", pass_seconds=9.0 if cold else 0.1)

    monkeypatch.setattr(peak_memory, "measure_in_subprocess", measure)
    variants = [Variant("float32", "float32"), Variant("slim_mp", "bfloat16")]
    memory = benchmark_suite._measure_memory("lenet", variants, Settings(2, None, 1, 0), lambda line: None, {},
                                             cache_dir="/cache/of/this/run")
    assert memory["slim_mp_bf16"].pass_seconds == 9.0
    assert {r.cache_dir for r in requests} == {"/cache/of/this/run"}


@pytest.mark.slow
def test_lenets_real_peaks_keep_the_contract(tmp_path):
    # Float32 LeNet at 28 px: the budget sits 6 MiB above batch 1's peak, so the answer is some
    # dozens of images; every batch is measured in its own subprocess.
    settings = Settings(1, None, 1, 0, memory_steps=1)
    first = peak_memory.measure_in_subprocess(peak_memory.MemoryRequest("float32", "lenet", "float32", 1, None, 1))
    budget_mb = (first.peak_bytes - first.baseline_bytes) / MIB + 6
    settings = dataclasses.replace(settings, memory_budget_mb=budget_mb)
    (fit,) = benchmark_suite._search_batches("lenet", [], settings, str(tmp_path), lambda line: None)
    assert fit.unavailable is None and fit.largest_batch is not None
    assert_contract(fit)
