"""Shared pytest setup for the whole suite.

- Quiet TensorFlow's C++ logs; forget a cluster manager's variables (``TF_CONFIG``, ``SLURM_*``).
- The default placement, measured, made deterministic and free of timing: a fixed timings file
  (``$SLIM_MP_TIMINGS_FILE``, inherited by subprocesses) says every op runs twice as fast in bfloat16
  and twice as slow in float16 (as emulation on a CPU is), so every test and script run goes
  through the measured placement's search, its decisions file and its report, and a float16 run
  that the measured placement would silently keep float32 fails the float16 tests.
  tests/graph_pass/placement/ checks the decisions with other fake timings. Timings of a
  placement that does measure (a test passing its own options) go to a temporary folder, not the
  user's cache.
- Import ``slim_mp`` from this checkout (not an installed copy) and the shared helpers of
  ``tests/support`` (``graph_checks``, ``nets_checks``, ``reference``, ``script_runs``,
  ``datasets_support``, ``session_builds``) as top-level modules.
- Apply the tf_slim compatibility fixes once per test process (``slim_mp.compat.install()``), so no
  test module has to import ``slim_mp`` only for its side effect; the pytest-xdist controller,
  which runs no test, does not import TensorFlow at all.
- A session folder for what several test processes would otherwise build each
  (``$SLIM_MP_TEST_BUILDS_DIR``, see ``session_builds``).
- ``--cpu-report=N`` prints the N tests and N files that cost the most CPU (``cpu_report``).
"""

import json
import os
import sys
import tempfile

# Milliseconds (float32, low) per op type; "*" for every type not named; a cast pair costs 1 us.
FIXED_TIMINGS = {
    "bfloat16": {"*": [1.0, 0.5], "Cast": [0.0, 0.001]},
    "float16": {"*": [1.0, 2.0], "Cast": [0.0, 0.001]},
}


def _fixed_timings_file() -> str:
    path = os.path.join(tempfile.mkdtemp(prefix="slim_mp_test_timings_"), "timings.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(FIXED_TIMINGS, handle)
    return path


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# A suite run inside a cluster manager's task (a Kubeflow pod, a Slurm job) must not turn the scripts it
# starts into that cluster's tasks: the tests that want a cluster environment set it themselves.
for _variable in [name for name in os.environ if name == "TF_CONFIG" or name.startswith("SLURM_")]:
    del os.environ[_variable]
os.environ.setdefault("SLIM_MP_CACHE_DIR", tempfile.mkdtemp(prefix="slim_mp_test_cache_"))
# Network builds the pytest-xdist workers share (``reference``): a new folder for every session, set
# before the workers start (they inherit it), never one left from an earlier session's code.
if "PYTEST_XDIST_WORKER" not in os.environ:
    os.environ["SLIM_MP_TEST_BUILDS_DIR"] = tempfile.mkdtemp(prefix="slim_mp_test_builds_")
if "SLIM_MP_TIMINGS_FILE" not in os.environ:
    os.environ["SLIM_MP_TIMINGS_FILE"] = _fixed_timings_file()

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(TESTS_DIR))
sys.path.insert(0, os.path.join(TESTS_DIR, "support"))


def pytest_addoption(parser) -> None:
    parser.addoption("--cpu-report", type=int, default=0, metavar="N",
                     help="print the N tests and N test files that cost the most CPU seconds, children included")


def pytest_configure(config) -> None:
    """Apply the tf_slim fixes in every process that runs tests; install ``--cpu-report``.

    The pytest-xdist controller of ``-n N`` only hands files to its workers, so it skips the
    fixes and with them TensorFlow's import (~7 s of CPU).
    """
    if config.option.cpu_report > 0:
        import cpu_report

        cpu_report.register(config, config.option.cpu_report)
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    import slim_mp.compat

    slim_mp.compat.install()
