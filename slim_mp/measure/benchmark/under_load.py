"""A CPU-bound background load for ``scripts/benchmark.py --background_load``, and the quiet re-timing after it.

The measured placement decides by timing on the machine it runs on; on a shared machine (or beside
a training job's own input pipeline) that machine is busy. ``BackgroundLoad`` makes it busy on
purpose: N busy-loop processes, one per core (pinned where the OS allows), started before the
benchmark and always stopped after it (on success, error or Ctrl-C; a loop whose parent died, say
by SIGKILL, stops by itself). The placement is decided and pinned (a decisions file per model)
while the load runs; ``retime_quietly`` then rebuilds float32 and the pinned placement with the load
stopped and times them side by side, so a decision the load spoiled shows as a slower step.
"""

import dataclasses
import os
import statistics
import subprocess
import sys
from typing import Callable, List, Optional, Sequence, Tuple

import tensorflow as tf

from slim_mp.graph_pass import PlacementFiles, PlacementOptions
from slim_mp.measure.benchmark import benchmark_step
from slim_mp.measure.benchmark.suite_results import QuietRetiming, VariantResult
from slim_mp.timing import paired_ratio

# Says it runs (one line on stdout), then spins until its parent (the pid it is given: read at its own
# start, the parent could already be gone) is gone: a load never outlives the benchmark that started it.
_RUNNING_LINE = b"spinning\n"
_BUSY_LOOP = ("import os, sys\nparent = int(sys.argv[1])\n"
              f"sys.stdout.buffer.write({_RUNNING_LINE!r})\nsys.stdout.flush()\n"
              "while os.getppid() == parent:\n    for _ in range(100000):\n        pass\n")
_STOP_SECONDS = 5.0


def check_background_load(processes: int, cores: Optional[int] = None) -> int:
    """``processes`` if it is a valid ``--background_load`` (0: off, else 1 to the number of cores).

    Raises:
      ValueError: naming ``--background_load`` and the accepted values.
    """
    cores = cores or len(_usable_cores())
    if not isinstance(processes, int) or isinstance(processes, bool) or not 0 <= processes <= cores:
        raise ValueError(f"--background_load={processes!r} is invalid; pass 0 (no load) or the number of "
                         f"busy-loop processes to run beside the benchmark, one per core: 1 to {cores} here.")
    return processes


def _usable_cores() -> List[int]:
    """The cores this process may run on (all of them where the OS cannot tell)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


class BackgroundLoad:
    """``processes`` busy loops while the ``with`` block runs, the i-th pinned to the i-th core from the last.

    A pure context manager: the loops start in ``__enter__``, which returns once each of them runs (a
    fresh interpreter takes tens of milliseconds to start, long enough for a first timing without load),
    and stop in ``__exit__``, whatever ends the block (nothing else starts or stops them); ``pids`` are the
    loops' process ids (empty when off and outside the block).
    """

    def __init__(self, processes: int):
        self.processes = processes
        self._running: List[subprocess.Popen] = []

    @property
    def pids(self) -> List[int]:
        """Process ids of the running loops."""
        return [process.pid for process in self._running]

    def __enter__(self) -> "BackgroundLoad":
        cores = _usable_cores()[::-1]
        try:
            for index in range(self.processes):
                process = subprocess.Popen([sys.executable, "-c", _BUSY_LOOP, str(os.getpid())],
                                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
                self._running.append(process)
                if hasattr(os, "sched_setaffinity"):
                    os.sched_setaffinity(process.pid, {cores[index % len(cores)]})
            for process in self._running:  # the interpreters start side by side, then each says it runs
                with process.stdout:
                    if process.stdout.readline() != _RUNNING_LINE:
                        raise RuntimeError(f"background load process {process.pid} ended before it ran "
                                           f"({sys.executable} -c <busy loop>); its error is above")
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, *error) -> None:
        self._stop()

    def _stop(self) -> None:
        """Terminate every loop and wait for it (killed if it does not stop within a few seconds)."""
        for process in self._running:
            process.terminate()
        for process in self._running:
            try:
                process.wait(_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._running = []


def decisions_path(decisions_dir: str, model: str, label: str) -> str:
    """Where the placement of ``label`` on ``model`` is pinned during a loaded benchmark."""
    return os.path.join(decisions_dir, f"{model}_{label}_placement.json")


def remove_decisions(decisions_dir: str, runs: Sequence[Tuple[str, str]]) -> None:
    """Delete the pinned placements of these (model, label) runs left by an earlier benchmark: stale, they
    would be reused (or refused, for another graph) instead of deciding under this load."""
    for model, label in runs:
        path = decisions_path(decisions_dir, model, label)
        if os.path.exists(path):
            os.remove(path)


def retime_quietly(result: VariantResult, baseline: Optional[VariantResult], decisions_dir: str,
                   background_load: int, batch_size: int, image_size: Optional[int], rounds: int, warmup: int,
                   progress: Callable[[str], None]) -> QuietRetiming:
    """Rebuild float32 and the placement of ``result`` (a slim_mp variant timed under load beside
    ``baseline``, float32's result) pinned in ``decisions_dir``, and time them interleaved for ``rounds``
    rounds after ``warmup`` steps each."""
    model, label = result.model, result.label
    loaded = None
    if baseline is not None and result.step_seconds and baseline.step_seconds:
        loaded = paired_ratio(result.step_seconds, baseline.step_seconds)
    path = decisions_path(decisions_dir, model, label)
    record = QuietRetiming(model, label, background_load, path, loaded_ratio=loaded)
    if not os.path.exists(path):
        return dataclasses.replace(record, unavailable="no placement was decided under load")
    progress(f"[{model}] {label}: quiet re-timing beside float32, the load stopped")
    options = PlacementOptions(PlacementFiles(decisions_file=path, write_decisions=False))
    steps = {}
    try:
        steps["float32"] = benchmark_step.build_benchmark_step("float32", model, tf.float32, batch_size, image_size)
        steps[label] = benchmark_step.build_benchmark_step("slim_mp", model, tf.as_dtype(result.precision),
                                                           batch_size, image_size, placement_options=options)
        times = benchmark_step.interleaved_times(
            {name: step.session.make_callable(step.train_op) for name, step in steps.items()}, rounds, warmup,
            progress=lambda line: progress(f"[{model}] quiet {line}"))
    except (ValueError, TypeError, tf.errors.OpError) as error:
        return dataclasses.replace(record, unavailable=f"{type(error).__name__}: {error}".splitlines()[0])
    finally:
        for step in steps.values():
            step.session.close()
    plan = steps[label].placement
    return dataclasses.replace(
        record, float32_ops=len(plan.float32_ops), low_ops=len(plan.low_ops),
        check=plan.check.verdict if plan.check else None,
        quiet_float32_ms=1000 * statistics.median(times["float32"]),
        quiet_slim_mp_ms=1000 * statistics.median(times[label]),
        quiet_ratio=paired_ratio(times[label], times["float32"]), quiet_step_seconds=times)


def summary_lines(retimings: Sequence[QuietRetiming]) -> List[str]:
    """One text line per re-timed placement: what was decided under load, and the two slim_mp/float32 ratios."""
    lines = []
    for retiming in retimings:
        head = f"[{retiming.model}] {retiming.label}:"
        if retiming.unavailable:
            lines.append(f"{head} quiet re-timing n/a ({retiming.unavailable})")
            continue
        loaded = "-" if retiming.loaded_ratio is None else f"{retiming.loaded_ratio:.3f}"
        lines.append(f"{head} decided under load ({retiming.background_load} busy process(es)): "
                     f"{retiming.float32_ops} allow ops float32, {retiming.low_ops} low, whole-step check "
                     f"{retiming.check or '-'}; slim_mp/float32 under load {loaded}, quiet re-timing "
                     f"{retiming.quiet_ratio:.3f} ({retiming.quiet_slim_mp_ms:.1f} vs "
                     f"{retiming.quiet_float32_ms:.1f} ms)")
    return lines
