"""``--cpu-report=N``: the CPU seconds each test and each test file costs, the N largest of each at the end.

Wall-clock ``--durations`` do not rank CPU on a loaded machine (a test waiting on a busy core looks
slow), and the suite's budget is CPU. A test's cost here is, over its setup, call and teardown
together, this process's CPU (``time.process_time``, every thread) plus the CPU of child processes
that ended meanwhile (``RUSAGE_CHILDREN``) plus the script runs of the preloaded server
(``script_runs.server_cpu_seconds``, whose children are not this process's). Module and session
fixtures land on the first test that uses them (teardown on the last), so the per-file totals say
what a file costs. Under pytest-xdist each worker measures its tests and sends the figure with the
test's report; the controller adds them up and prints the tables.
"""

import collections
import resource
import sys
import time
from typing import Dict, List, Tuple

import pytest


def cpu_seconds_so_far() -> float:
    """This process's CPU, its ended children's and the preloaded script server's, in seconds."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    script_runs = sys.modules.get("script_runs")  # no server runs before a test imports it
    server = script_runs.server_cpu_seconds() if script_runs else 0.0
    return time.process_time() + children.ru_utime + children.ru_stime + server


class WorkerMeter:
    """Set on each test phase's report the CPU seconds spent since the previous phase ended."""

    def __init__(self, config) -> None:
        self._config = config
        self._last = cpu_seconds_so_far()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self) -> None:
        self._last = cpu_seconds_so_far()  # collection and the gaps between tests are no test's

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self):
        outcome = yield
        now = cpu_seconds_so_far()
        outcome.get_result().cpu_seconds = now - self._last
        self._last = now

    def pytest_sessionfinish(self) -> None:
        """Send a worker's whole CPU, start-up and collection included, to the controller."""
        if hasattr(self._config, "workeroutput"):
            self._config.workeroutput["cpu_seconds"] = cpu_seconds_so_far()


class Tables:
    """Collect the reports' CPU figures and print the largest tests and files at the session's end."""

    def __init__(self, top: int) -> None:
        self.top = top
        self.per_test: Dict[str, float] = collections.defaultdict(float)
        self.workers_cpu_s = 0.0

    def pytest_testnodedown(self, node) -> None:
        self.workers_cpu_s += getattr(node, "workeroutput", {}).get("cpu_seconds", 0.0)

    def pytest_runtest_logreport(self, report) -> None:
        self.per_test[report.nodeid] += getattr(report, "cpu_seconds", 0.0)

    def largest_files(self) -> List[Tuple[str, float]]:
        per_file: Dict[str, float] = collections.defaultdict(float)
        for nodeid, seconds in self.per_test.items():
            per_file[nodeid.split("::", 1)[0]] += seconds
        return sorted(per_file.items(), key=lambda item: -item[1])[:self.top]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        in_tests = sum(self.per_test.values())
        # A controller's ended workers are in its RUSAGE_CHILDREN too: count them once, as they reported.
        whole = time.process_time() + self.workers_cpu_s if self.workers_cpu_s else cpu_seconds_so_far()
        write = terminalreporter.write_line
        terminalreporter.section(f"CPU seconds: {in_tests:.1f} in {len(self.per_test)} tests, {whole:.1f} in all")
        write("(in all: this process and its workers with their start-up and collection; "
              "a preloaded script server's exit is not counted)")
        write(f"largest {self.top} tests (setup + call + teardown, children included):")
        for nodeid, seconds in sorted(self.per_test.items(), key=lambda item: -item[1])[:self.top]:
            write(f"{seconds:8.1f}  {nodeid}")
        write(f"largest {self.top} files:")
        for path, seconds in self.largest_files():
            write(f"{seconds:8.1f}  {path}")


def register(config, top: int) -> None:
    """Install the meter in a process that runs tests and the tables in the one that reports."""
    is_worker = hasattr(config, "workerinput")
    is_controller = bool(getattr(config.option, "numprocesses", None)) and not is_worker
    if not is_controller:
        config.pluginmanager.register(WorkerMeter(config), "cpu_report_meter")
    if not is_worker:
        config.pluginmanager.register(Tables(top), "cpu_report_tables")
