"""scripts/demo.py as a user runs it: bad input, and a whole run (its pieces: tests/measure/test_demo_*.py)."""

import json
import os
import re

import pytest

from script_runs import REPO_ROOT, check_bad_input, check_ok, run_script

DEMO_SCRIPT = os.path.join(REPO_ROOT, "scripts", "demo.py")


@pytest.mark.parametrize("flag, expected", [
    ("--steps=0", "error: flag --steps=0: 0 is not a positive integer"),
    ("--steps=many", "error: flag --steps=many: invalid literal"),
    ("--budget_seconds=5", "error: flag --budget_seconds=5: 5.0 is not number >= 30.0"),
])
def test_bad_input_is_one_error_line_and_exit_status_2(flag, expected, tmp_path):
    process = run_script(DEMO_SCRIPT, f"--output_dir={tmp_path / 'demo'}", flag)
    check_bad_input(process, expected)
    assert not (tmp_path / "demo").exists()


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
