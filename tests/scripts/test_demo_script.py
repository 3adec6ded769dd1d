"""scripts/demo.py's command line: bad input is refused with the scripts' convention before any training."""

import os

import pytest

from script_runs import REPO_ROOT, check_bad_input, run_script

DEMO_SCRIPT = os.path.join(REPO_ROOT, "scripts", "demo.py")


@pytest.mark.parametrize("flag, expected", [
    ("--steps=0", "error: flag --steps=0: 0 is not a positive integer"),
    ("--steps=many", "error: flag --steps=many: invalid literal"),
])
def test_bad_input_is_one_error_line_and_exit_status_2(flag, expected, tmp_path):
    process = run_script(DEMO_SCRIPT, f"--output_dir={tmp_path / 'demo'}", flag)
    check_bad_input(process, expected)
    assert not (tmp_path / "demo").exists()
