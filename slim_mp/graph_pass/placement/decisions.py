"""The decisions file (``placement.json`` in a training run's folder): one run's placement, pinned.

The chief of a run writes it after measuring; a resumed run and every worker of a cluster read it,
so all build the same graph. A file for another precision or another graph, or a damaged one, is an
error naming the file: ignoring it would silently build a different graph.
"""

import time
from typing import Optional

import tensorflow as tf

from slim_mp.json_files import (JsonFileError, ListOf, MappingOf, MaybeMissing, read_json_file, shape_problem,
                                write_json_atomically)
from slim_mp.graph_pass.gradient_kernels import GradientKernels
from slim_mp.graph_pass.placement.plan import PlacementPlan
from slim_mp.graph_pass.placement.step_check import CheckVerdict, StepCheck
from slim_mp.graph_pass.region import Region

DECISIONS_FILE_NAME = "placement.json"
_AGAIN = "delete the file (or pass another decisions_file) to measure again."
_NUMBER_OR_NONE = (int, float, type(None))
_SCHEMA = {
    "precision": str, "float32_ops": MappingOf(str), "low_ops": ListOf(str), "tail_low": MaybeMissing(bool),
    "estimated_ms": MaybeMissing(_NUMBER_OR_NONE), "static_estimated_ms": MaybeMissing(_NUMBER_OR_NONE),
    "float32_estimated_ms": MaybeMissing(_NUMBER_OR_NONE), "check": MaybeMissing((dict, type(None))),
    "gradient_kernels": MaybeMissing(MappingOf(MappingOf(str))), "gradient_reasons": MaybeMissing(MappingOf(str)),
    "timed_step": MaybeMissing(str), "timed_batches": MaybeMissing(ListOf(int)), "timed": MaybeMissing(bool),
    "source": MaybeMissing(str),
}
_CHECK_SCHEMA = {"verdict": str, "reason": str, **{name: MaybeMissing(_NUMBER_OR_NONE) for name in
                                                    ("chosen_ms", "float32_ms", "static_ms", "noise")}}


def read_decisions(path: str, precision: tf.DType) -> Optional[PlacementPlan]:
    """The plan pinned in ``path``; None when the file does not exist.

    Raises:
      ValueError: when the file is damaged or holds decisions for another precision.
    """
    try:
        stored = read_json_file(path, _SCHEMA)
    except FileNotFoundError:
        return None
    except JsonFileError as error:
        raise ValueError(f"{error}: it is not a placement decisions file; {_AGAIN}") from error
    check = stored.get("check")
    problem = _check_problem(check)
    if problem:
        raise _damaged(path, problem)
    try:
        kernels = GradientKernels.by_role(stored.get("gradient_kernels", {}))
    except ValueError as error:
        raise _damaged(path, f"'gradient_kernels': {error}") from error
    if stored["precision"] != precision.name:
        raise ValueError(f"{path} holds placement decisions for {stored['precision']!r}, not {precision.name!r}; "
                         + _AGAIN)
    timed = stored.get("timed", True)
    source = f"reused from {path}" + ("" if timed else f": {stored.get('source', 'nothing timed')}")
    return PlacementPlan(float32_ops=dict(stored["float32_ops"]), low_ops=list(stored["low_ops"]),
                         tail_low=stored.get("tail_low", False), estimated_ms=stored.get("estimated_ms"),
                         static_estimated_ms=stored.get("static_estimated_ms"),
                         float32_estimated_ms=stored.get("float32_estimated_ms"), source=source, timed=timed,
                         check=_stored_check(check), gradient_kernels=kernels,
                         gradient_reasons=dict(stored.get("gradient_reasons", {})),
                         timed_step=stored.get("timed_step", "forward + backward"),
                         timed_batches=tuple(stored.get("timed_batches", ())))


def _damaged(path: str, problem: str) -> ValueError:
    """The error of a decisions file whose content is not a placement's: naming it, the problem, and what to do."""
    return ValueError(f"{JsonFileError(path, problem)}: it is not a placement decisions file; {_AGAIN}")


def _check_problem(check: Optional[dict]) -> str:
    """What is wrong with the whole-step check a decisions file records ("" when nothing, or none recorded)."""
    if check is None:
        return ""
    problem = shape_problem(check, _CHECK_SCHEMA, "'check'")
    verdicts = [verdict.value for verdict in CheckVerdict]
    if not problem and check["verdict"] not in verdicts:
        problem = f"'check' has the verdict {check['verdict']!r}, not one of {', '.join(map(repr, verdicts))}"
    return problem


def _stored_check(check: Optional[dict]) -> Optional[StepCheck]:
    """The whole-step check a decisions file records (already shape-checked), or None."""
    if not check:
        return None
    values = {name: check.get(name) for name in _CHECK_SCHEMA}
    return StepCheck(**dict(values, verdict=CheckVerdict(check["verdict"])))


def check_decisions_fit(plan: PlacementPlan, region: Region, path: str) -> None:
    """Raise ValueError if ``plan`` names ops ``region`` lacks, or gradient kernels its ops cannot take: it was
    decided for another graph."""
    ops = {op.name: op for op in region.ops}
    missing = sorted((set(plan.float32_ops) | set(plan.low_ops) | plan.gradient_kernels.names()) - set(ops))
    if missing:
        raise ValueError(f"{path} holds placement decisions for another graph ({len(missing)} of its ops, e.g. "
                         f"{missing[0]!r}, are not in this one); " + _AGAIN)
    try:
        plan.gradient_kernels.check(ops)
    except ValueError as error:
        raise ValueError(f"{path} holds placement decisions for another graph ({error}); " + _AGAIN) from error


def wait_for_decisions(path: str, precision: tf.DType, wait_seconds: float,
                       poll_seconds: float) -> Optional[PlacementPlan]:
    """``read_decisions``, retried every ``poll_seconds`` for up to ``wait_seconds`` while the file is missing."""
    deadline = time.monotonic() + wait_seconds
    while True:
        plan = read_decisions(path, precision)
        if plan is not None or time.monotonic() >= deadline:
            return plan
        time.sleep(poll_seconds)


def write_decisions(path: str, plan: PlacementPlan, precision: tf.DType, device: str) -> None:
    """Pin ``plan`` in ``path`` (atomically), with the precision, device and TensorFlow version it was made for."""
    write_json_atomically(path, dict(plan.as_json(), precision=precision.name, device=device,
                                     tensorflow=tf.__version__))
