"""Every script's screen holds its own lines: TensorFlow's start-up notices are filtered, its errors are not."""

import ast
import glob
import os
import subprocess
import sys

from script_runs import EVAL_SCRIPT, REPO_ROOT, script_env

SCRIPTS_DIR = os.path.join(REPO_ROOT, "scripts")
HOOK = "quiet_tensorflow_start"
# demo.py sends TensorFlow's lines from its first import to its own log file (its docstring says how).
OWN_LOG_FROM_THE_START = {"demo.py"}


def test_every_script_imports_the_filter_first():
    for path in sorted(glob.glob(os.path.join(SCRIPTS_DIR, "*.py"))):
        name = os.path.basename(path)
        if name in OWN_LOG_FROM_THE_START or name == f"{HOOK}.py":
            continue
        with open(path, encoding="utf-8") as handle:
            body = ast.parse(handle.read()).body
        imports = [node for node in body if isinstance(node, (ast.Import, ast.ImportFrom))]
        assert isinstance(imports[0], ast.Import) and imports[0].names[0].name == HOOK, name


def test_a_bad_flag_in_a_fresh_process_is_the_only_line_on_screen(tmp_path):
    """TensorFlow's own log level, as a user's shell has it (unset): only the script's error line remains."""
    environment = {key: value for key, value in script_env().items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    process = subprocess.run(
        [sys.executable, EVAL_SCRIPT, f"--checkpoint_path={tmp_path / 'none'}", f"--eval_dir={tmp_path}",
         "--dataset_name=fashion_mnist", "--model_name=lenet"],
        capture_output=True, text=True, env=environment, timeout=300)
    assert process.returncode == 2
    assert process.stderr.splitlines() == [
        f"error: --checkpoint_path={tmp_path / 'none'} is not a readable checkpoint (none.index is missing); pass a "
        "checkpoint prefix such as model.ckpt-1000 (without .index) or its folder."
    ]


# A module standing in for TensorFlow: the notices of TensorFlow 2.21's import (as this CPU printed them), then a
# fatal line of its own, then an abort, as TensorFlow's C++ code aborts.
CRASHING_IMPORT = r'''
import os
os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n")
os.write(2, b"I0000 00:00:1796474995.790131    6055 port.cc:153] oneDNN custom operations are on. You may see "
            b"slightly different numerical results due to floating-point round-off errors from different "
            b"computation orders. To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.\n")
os.write(2, b"I0000 00:00:1796474996.166392    6055 cpu_feature_guard.cc:227] This TensorFlow binary is optimized "
            b"to use available CPU instructions in performance-critical operations.\n")
os.write(2, b"To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow with "
            b"the appropriate compiler flags.\n")
os.write(2, b"F0000 00:00:1796474996.2    6055 cpu_feature_guard.cc:50] The TensorFlow library was compiled to "
            b"use AVX instructions, but these aren't available on your machine.\n")
os.abort()
'''


def test_an_error_before_a_crash_in_the_import_still_reaches_the_screen(tmp_path):
    (tmp_path / "crashing_import.py").write_text(CRASHING_IMPORT)
    program = ("import sys, types; sys.modules['tensorflow'] = types.ModuleType('tensorflow')\n"
               f"sys.path[:0] = [{SCRIPTS_DIR!r}, {str(tmp_path)!r}]\n"
               f"import {HOOK}; {HOOK}.import_quietly('crashing_import')\n")
    process = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=60)
    assert process.returncode < 0  # the abort
    lines = process.stderr.decode().splitlines()
    assert ("F0000 00:00:1796474996.2    6055 cpu_feature_guard.cc:50] The TensorFlow library was compiled to use "
            "AVX instructions, but these aren't available on your machine.") in lines
    assert not [line for line in lines if "InitializeLog" in line or "] oneDNN" in line or "rebuild TensorFlow" in line
                or "] This TensorFlow binary" in line]
