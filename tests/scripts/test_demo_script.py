"""scripts/demo.py: bad input, the device explanation for both kinds of CPU, the budget sizing, and a whole run."""

import importlib.util
import json
import os
import re
import sys

import pytest

from script_runs import REPO_ROOT, check_bad_input, check_ok, run_script
from slim_mp.devices import DeviceInfo

DEMO_SCRIPT = os.path.join(REPO_ROOT, "scripts", "demo.py")


@pytest.fixture(scope="module")
def demo():
    """The demo script as a module (imported once per test process: it defines its flags on import)."""
    name = "demo_script_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DEMO_SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


def comparison(demo, float32_seconds, low_seconds, build_seconds=1.0, low_ops=5, float32_ops=0):
    return demo.SpeedComparison(demo.IMAGE_SIZE, 20, float32_seconds, low_seconds, float32_seconds / low_seconds,
                                build_seconds, build_seconds * 3, low_ops, float32_ops)


@pytest.mark.parametrize("flag, expected", [
    ("--steps=0", "error: flag --steps=0: 0 is not a positive integer"),
    ("--steps=many", "error: flag --steps=many: invalid literal"),
    ("--budget_seconds=5", "error: flag --budget_seconds=5: 5.0 is not number >= 30.0"),
])
def test_bad_input_is_one_error_line_and_exit_status_2(flag, expected, tmp_path):
    process = run_script(DEMO_SCRIPT, f"--output_dir={tmp_path / 'demo'}", flag)
    check_bad_input(process, expected)
    assert not (tmp_path / "demo").exists()


@pytest.mark.parametrize("flags, instruction", [({"avx512_bf16"}, "avx512_bf16"), ({"amx_bf16"}, "amx_bf16")])
def test_a_cpu_with_bfloat16_instructions_is_explained_as_native(demo, flags, instruction):
    lines = demo.describe_device(DeviceInfo("CPU", "AMD EPYC", cpu_flags=frozenset(flags)), "bfloat16")
    text = "\n".join(lines)
    assert f"bfloat16: native (the CPU has {instruction})" in text
    assert "emulated" not in text


def test_a_cpu_without_bfloat16_instructions_is_explained_as_emulated_with_what_to_expect(demo):
    lines = demo.describe_device(DeviceInfo("CPU", "AMD EPYC 7B13"), "bfloat16")
    text = "\n".join(lines)
    assert "bfloat16: not native" in text
    assert text.count("neither avx512_bf16 nor amx_bf16") == 1  # the reason, said once
    assert "about float32's speed" in text


def test_where_bfloat16_is_emulated_the_large_timing_is_replaced_by_the_native_figures(demo):
    fast = comparison(demo, 0.001, 0.001)
    reason = demo.large_timing_skipped("bfloat16", False, fast, 210.0)
    assert "emulated" in reason and "AVX512-BF16" in reason and "128x128" in reason
    assert demo.large_timing_skipped("bfloat16", True, fast, 210.0) is None


def test_where_bfloat16_is_native_the_large_timing_runs_only_if_it_fits_the_budget(demo):
    slow = comparison(demo, 1.0, 0.8)
    reason = demo.large_timing_skipped("bfloat16", True, slow, 210.0)
    assert "budget" in reason and "1.40x at 128x128" in reason


@pytest.mark.parametrize("native", [True, False])
def test_a_speed_up_below_1x_always_comes_with_its_reason(demo, native):
    line = demo.speed_line("bfloat16", comparison(demo, 0.050, 0.052), native)
    assert "0.96x" in line and "below 1x" in line
    assert ("emulated" in line) == (not native)
    assert "below 1x" not in demo.speed_line("bfloat16", comparison(demo, 0.052, 0.050), native)
    rounds_to_one = demo.speed_line("bfloat16", comparison(demo, 0.0500, 0.0502), native)  # 0.996x
    assert "1.00x" in rounds_to_one and "below 1x" not in rounds_to_one
    all_float32 = demo.speed_line("bfloat16", comparison(demo, 0.050, 0.052, low_ops=0, float32_ops=5), native)
    assert "below 1x" in all_float32 and "kept every op float32" in all_float32


def test_a_table_speed_up_below_1x_carries_its_reason(demo):
    rows = [demo.RunSummary("float32", 0.5, 0.7, 100.0), demo.RunSummary("bfloat16", 0.5, 0.7, 95.0)]
    slower = comparison(demo, 0.050, 0.052, low_ops=0, float32_ops=5)
    table = demo.format_table(rows, slower.speedup, demo.below_one_reason("bfloat16", slower, False))
    assert "0.96x" in table and "bfloat16 speed-up below 1x" in table
    faster = comparison(demo, 0.052, 0.050)
    assert "below 1x" not in demo.format_table(rows, faster.speedup, demo.below_one_reason("bfloat16", faster, True))


def test_a_ten_times_slower_machine_trains_at_least_ten_times_fewer_steps_within_the_same_time(demo):
    seconds_left, startup = 200.0, 8.0
    fast_step, slow_step = 0.05, 0.5
    fast = demo.steps_that_fit(seconds_left, startup, comparison(demo, fast_step, fast_step, build_seconds=0.5))
    slow = demo.steps_that_fit(seconds_left, startup, comparison(demo, slow_step, slow_step, build_seconds=0.5))
    assert 1 <= slow <= fast / 10 < demo.MAX_STEPS
    # Both runs' training steps alone (at the training step's cost) fit what is left.
    assert 2 * slow * slow_step * demo.TRAIN_STEP_FACTOR < seconds_left
    # The slower precision sets the pace, so both runs take the same steps.
    assert demo.steps_that_fit(seconds_left, startup, comparison(demo, fast_step, slow_step, build_seconds=0.5)) == slow
    assert demo.steps_that_fit(seconds_left, startup, comparison(demo, 0.0001, 0.0001)) == demo.MAX_STEPS


def test_nothing_fits_still_trains_the_fewest_steps_that_show_something(demo):
    assert demo.steps_that_fit(1.0, 8.0, comparison(demo, 1.0, 1.0)) == demo.MIN_STEPS


@pytest.mark.slow
def test_the_default_demo_on_a_small_budget_prints_only_its_own_lines(tmp_path):
    """The default path (measured placement, steps sized from the budget), end to end, on the smallest budget.

    The suite's fixed timings file decides the placement, so this does not depend on the machine's speed.
    """
    output_dir = tmp_path / "demo"
    process = check_ok(run_script(DEMO_SCRIPT, f"--output_dir={output_dir}", "--budget_seconds=30"))
    out = process.stdout
    assert process.stderr.strip() == "", process.stderr[-2000:]
    for noise in ("INFO:", "WARNING:", "I0000", "tensorflow:"):
        assert noise not in out, out
    assert "tensorflow.log" in out and (output_dir / "tensorflow.log").stat().st_size > 0
    assert re.search(r"^device: CPU .*$", out, re.M) and "bfloat16: " in out
    assert re.search(r"measured placement at 32x32: \d+ of 5 conv/matmul ops in bfloat16", out)
    assert "128x128: " in out
    steps = int(re.search(r"training cifarnet from scratch, (\d+) steps in each precision", out).group(1))
    for precision in ("float32", "bfloat16"):
        assert re.search(rf"^  {precision} +step=\d+ loss=\S+ loss_scale=\S+ skipped=0 lr=\S+ images/s=\d+ eta=\d+s$",
                         out, re.M), out
        row = re.search(rf"^{precision} +(\S+) +(\S+) +(\S+) +(\S+)x$", out, re.M)
        loss, accuracy = float(row.group(1)), float(row.group(2))
        assert loss > 0 and 0.0 <= accuracy <= 1.0
        with open(output_dir / precision / "eval" / "metrics.json") as handle:
            assert json.load(handle)["accuracy"] == pytest.approx(accuracy, abs=1e-4)
    # The mixed-precision run trained with the placement the speed comparison measured.
    with open(output_dir / "placement_bfloat16.json") as timed:
        with open(output_dir / "bfloat16" / "placement.json") as used:
            assert json.load(timed)["low_ops"] == json.load(used)["low_ops"]
    assert f"{steps} steps" in out.split("\ncifarnet on fashion_mnist")[1]
