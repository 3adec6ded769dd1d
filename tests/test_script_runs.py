"""run_script (tests/support/script_runs.py): a forked script run reports what `python script.py` would."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from script_runs import abort_after, finish_or_show_stacks, run_script, script_env

SCRIPT = """
import json, os, signal, sys
mode = sys.argv[1]
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "name": __name__, "file": __file__,
                  "path0": sys.path[0], "marker": os.environ.get("SCRIPT_RUNS_MARKER")}))
sys.stderr.write("to stderr\\n")
if mode == "raise":
    raise RuntimeError("uncaught")
if mode == "exit":
    sys.exit(3)
if mode == "kill":
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "tool" / "probe.py"
    path.parent.mkdir()
    path.write_text(SCRIPT)
    return str(path)


def test_a_run_gets_argv_environment_working_directory_and_its_own_main(script, tmp_path, monkeypatch):
    monkeypatch.setenv("SCRIPT_RUNS_MARKER", "set by the test")
    monkeypatch.chdir(tmp_path)
    process = run_script(script, "ok", "--flag=1")
    assert process.returncode == 0, process.stderr
    assert process.stderr == "to stderr\n"
    seen = json.loads(process.stdout)
    assert seen == {"argv": [script, "ok", "--flag=1"], "cwd": str(tmp_path), "name": "__main__", "file": script,
                    "path0": os.path.dirname(script), "marker": "set by the test"}


@pytest.mark.parametrize("mode, returncode", [("raise", 1), ("exit", 3), ("kill", -signal.SIGKILL)])
def test_exit_status_is_the_scripts_own(script, mode, returncode):
    process = run_script(script, mode)
    assert process.returncode == returncode, process.stderr
    assert '"argv"' in process.stdout
    assert ("Traceback" in process.stderr and "RuntimeError: uncaught" in process.stderr) == (mode == "raise")


def test_a_script_that_does_not_finish_fails_with_the_stack_of_each_thread():
    waiter = ("import threading, time\n"
              "def wait_in_a_thread():\n    time.sleep(60)\n"
              "threading.Thread(target=wait_in_a_thread, daemon=True).start()\n"
              "print('waiting', flush=True)\n"
              "time.sleep(60)\n")
    process = subprocess.Popen([sys.executable, "-c", waiter], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=script_env())
    assert process.stdout.readline() == "waiting\n"  # both threads are waiting from here on
    with pytest.raises(AssertionError, match="still ran after 1 s") as failure:
        finish_or_show_stacks(process, 1)
    assert "in wait_in_a_thread" in str(failure.value) and "in <module>" in str(failure.value)
    assert process.returncode == -signal.SIGABRT


def test_reading_a_silent_script_line_by_line_ends_at_the_timeout_with_its_stack():
    silent = "import time\ntime.sleep(30)\n"  # prints nothing, then would exit on its own after 30 s
    process = subprocess.Popen([sys.executable, "-c", silent], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=script_env())
    started = time.monotonic()
    with abort_after(process, 2):
        lines = list(process.stdout)
    _, stderr = process.communicate(timeout=30)
    assert lines == [] and time.monotonic() - started < 20
    assert process.returncode == -signal.SIGABRT and "in <module>" in stderr
