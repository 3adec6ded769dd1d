"""The demo's pieces (``slim_mp.measure.demo``): the device lines, the speed lines, the budget planner, the table."""

import os
import subprocess
import time

import pytest

from slim_mp.devices import DeviceInfo
from slim_mp.measure.demo import budget, speed, training_runs
from slim_mp.measure.demo.recorded_runs import NATIVE_RUN
from slim_mp.measure.demo.workload import IMAGE_SIZE


def comparison(float32_seconds, low_seconds, build_seconds=1.0, low_ops=5, float32_ops=0):
    return speed.SpeedComparison(IMAGE_SIZE, 20, float32_seconds, low_seconds, float32_seconds / low_seconds,
                                 build_seconds, build_seconds * 3, low_ops, float32_ops)


@pytest.mark.parametrize("flags, instruction", [({"avx512_bf16"}, "avx512_bf16"), ({"amx_bf16"}, "amx_bf16")])
def test_a_cpu_with_bfloat16_instructions_is_explained_as_native(flags, instruction):
    lines = speed.describe_device(DeviceInfo("CPU", "AMD EPYC", cpu_flags=frozenset(flags)), "bfloat16")
    text = "\n".join(lines)
    assert f"bfloat16: native (the CPU has {instruction})" in text
    assert "emulated" not in text


def test_a_cpu_without_bfloat16_instructions_is_explained_as_emulated_with_what_to_expect():
    lines = speed.describe_device(DeviceInfo("CPU", "AMD EPYC 7B13"), "bfloat16")
    text = "\n".join(lines)
    assert "bfloat16: not native" in text
    assert text.count("neither avx512_bf16 nor amx_bf16") == 1  # the reason, said once
    assert "about float32's speed" in text


def test_where_bfloat16_is_emulated_the_large_timing_is_replaced_by_the_native_run_figures():
    fast = comparison(0.001, 0.001)
    reason = budget.large_timing_skipped("bfloat16", False, fast, 210.0)
    assert "emulated" in reason and NATIVE_RUN.machine in reason
    quoted = f"{NATIVE_RUN.speedup:.2f}x float32's speed at 32x32 and {NATIVE_RUN.large_speedup:.2f}x at 128x128"
    assert quoted in reason
    assert budget.large_timing_skipped("bfloat16", True, fast, 210.0) is None


def test_where_bfloat16_is_native_the_large_timing_runs_only_if_it_fits_the_budget():
    slow = comparison(1.0, 0.8)
    reason = budget.large_timing_skipped("bfloat16", True, slow, 210.0)
    assert "budget" in reason and f"{NATIVE_RUN.large_speedup:.2f}x at 128x128" in reason
    # Its cost scales with the pixels: the same step at a quarter of the time fits a larger budget.
    assert budget.large_timing_skipped("bfloat16", True, comparison(0.01, 0.008), 210.0) is None


@pytest.mark.parametrize("native", [True, False])
def test_a_speed_up_below_1x_always_comes_with_its_reason(native):
    line = speed.speed_line("bfloat16", comparison(0.050, 0.052), native)
    assert "0.96x" in line and "below 1x" in line
    assert ("emulated" in line) == (not native)
    assert "below 1x" not in speed.speed_line("bfloat16", comparison(0.052, 0.050), native)
    rounds_to_one = speed.speed_line("bfloat16", comparison(0.0500, 0.0502), native)  # 0.996x
    assert "1.00x" in rounds_to_one and "below 1x" not in rounds_to_one
    all_float32 = speed.speed_line("bfloat16", comparison(0.050, 0.052, low_ops=0, float32_ops=5), native)
    assert "below 1x" in all_float32 and "kept every op float32" in all_float32


def test_a_table_speed_up_below_1x_carries_its_reason():
    rows = [training_runs.RunSummary("float32", 0.5, 0.7, 100.0), training_runs.RunSummary("bfloat16", 0.5, 0.7, 95.0)]
    slower = comparison(0.050, 0.052, low_ops=0, float32_ops=5)
    table = training_runs.format_table(rows, slower.speedup, speed.below_one_reason("bfloat16", slower, False))
    assert "0.96x" in table and "bfloat16 speed-up below 1x" in table
    faster = comparison(0.052, 0.050)
    assert "below 1x" not in training_runs.format_table(rows, faster.speedup,
                                                         speed.below_one_reason("bfloat16", faster, True))


def test_a_ten_times_slower_machine_trains_at_least_ten_times_fewer_steps_within_the_same_time():
    seconds_left, startup = 200.0, 8.0
    fast_step, slow_step = 0.05, 0.5
    fast = budget.steps_that_fit(seconds_left, startup, comparison(fast_step, fast_step, build_seconds=0.5))
    slow = budget.steps_that_fit(seconds_left, startup, comparison(slow_step, slow_step, build_seconds=0.5))
    assert 1 <= slow <= fast / 10 < budget.MAX_STEPS
    # Both runs' training steps alone (at the training step's cost) fit what is left.
    assert 2 * slow * slow_step * budget.TRAIN_STEP_FACTOR < seconds_left
    assert budget.overrun_note(slow, seconds_left, startup, comparison(slow_step, slow_step, build_seconds=0.5)) is None
    # The slower precision sets the pace, so both runs take the same steps.
    assert budget.steps_that_fit(seconds_left, startup, comparison(fast_step, slow_step, build_seconds=0.5)) == slow
    assert budget.steps_that_fit(seconds_left, startup, comparison(0.0001, 0.0001)) == budget.MAX_STEPS


def test_nothing_fits_still_trains_the_fewest_steps_that_show_something_and_says_so():
    too_slow = comparison(1.0, 1.0)
    steps = budget.steps_that_fit(1.0, 8.0, too_slow)
    assert steps == budget.MIN_STEPS
    assert "slower than the budget allows for 50 steps" in budget.overrun_note(steps, 1.0, 8.0, too_slow)
    assert "about 65% top-1 at 60 steps, 78% at 300" in budget.few_steps_note(steps)
    assert budget.few_steps_note(budget.FEW_STEPS) is None


def test_the_budget_counts_from_the_process_start_as_the_system_reports_it():
    # ps reports the seconds since this process started (whole seconds, rounded down).
    reported = int(subprocess.run(["ps", "-o", "etimes=", "-p", str(os.getpid())],
                                  capture_output=True, text=True, check=True).stdout)
    age = time.monotonic() - budget.process_started()
    assert reported - 0.5 <= age <= reported + 1.5
