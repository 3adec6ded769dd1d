"""What an uncaught error of a training loop prints: one ``error:`` line for what the seams recognise.

A user's script ends in the official loops, which let errors through as tracebacks (and tf_slim's
Supervisor logs each once more as an INFO line). ``install_error_lines`` (run by ``import slim_mp``) chains a
``sys.excepthook`` that prints ``error: <sentence>`` instead, for:

- the seams' own errors: ``TrainingDivergedError``, ``TrainDirInUseError``, ``DamagedCheckpointError``;
- what an official loop let through (``official_loops.failed_loop``), recognised for what it is:
  a failed restore of a damaged latest checkpoint (tf_slim reports it as a bare ``RuntimeError:
  generator didn't yield``), with ``train_dir_guard``'s sentence; TensorBoard's histogram of a
  tensor holding inf/NaN (often the first symptom of a divergence, in a Supervisor's summary
  thread), as the divergence with the diagnosis the step function found; a reader's error (a shard
  damaged, truncated, removed or unreadable), naming the file and the checkpoint the loop holds.

Every other error prints as before, and the exit status stays Python's (1). The Coordinator's INFO
line for an error it re-raises is dropped (the error is printed once, as its line or traceback),
and so are TensorFlow's exit-time notes on ops the failed loop never ran, after an error line (a
filter on TensorFlow's logger). ``$SLIM_MP_ERROR_LINES=0`` before ``import slim_mp`` installs
neither the hook nor the filter; ``sys.excepthook = sys.__excepthook__`` undoes the hook later.
"""

import logging
import re
import sys
import types
from typing import Optional, Sequence, Type

import tensorflow as tf

from slim_mp.compat import switched_on
from slim_mp.datasets.tfrecord_reader import named_read_errors
from slim_mp.loss_scale import NONFINITE_SUMMARY, TrainingDivergedError, read_divergence
from slim_mp.numerics import DATA_SOURCE_OP_TYPES
from slim_mp.seams.official_loops import OfficialLoop, failed_loop
from slim_mp.seams.preemption import TerminatedAfterSave
from slim_mp.seams.step_watch import StepStage, existing_step_watch, watched_graphs
from slim_mp.seams.train_dir_guard import DamagedCheckpointError, damaged_checkpoint_error
from slim_mp.train_dir import TrainDirInUseError

ERROR_LINES_ENV = "SLIM_MP_ERROR_LINES"
ONE_LINE_ERRORS = (TrainingDivergedError, TrainDirInUseError, DamagedCheckpointError)
DATA_ERRORS = (
    tf.errors.DataLossError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError, tf.errors.PermissionDeniedError,
)
# Ops that read input files: the queue readers of tf_slim's DatasetDataProvider, and the batch sources.
_READER_OP_TYPES = frozenset({"ReaderReadV2", "ReaderReadUpToV2"}) | DATA_SOURCE_OP_TYPES
# Lines of a graph-mode OpError's message around its reason: the header, where the node was built, the node.
_MESSAGE_FRAME = ("Graph execution error", "Detected at node", "File ", "Node:", "[[")
_COORDINATOR_RECORD = "Error reported to Coordinator"
# What TensorFlow logs at exit for an op the failed loop built but never ran (its ready check, say).
_NEVER_USED_RECORD = "Object was never used"
_printed_one_line = []  # set once an error line was printed: the process is ending
# An error raised in another thread (a queue runner, through the Coordinator) names its node only in the message.
_NODE = re.compile(r"\{\{node ([^}]+)\}\}")


def tensorflow_reason(error: tf.errors.OpError) -> str:
    """The reason in TensorFlow's ``error`` (a missing or unreadable file's names it), without the node's frame."""
    reasons = [line.strip() for line in error.message.splitlines()
               if line.strip() and not line.strip().startswith(_MESSAGE_FRAME)]
    return f"{type(error).__name__}: {reasons[-1] if reasons else 'no reason given'}"


def _input_files(graph: tf.Graph) -> Sequence[str]:
    """The files the graph's string constants name (the readers' file lists), in the order built."""
    files = []
    for op in graph.get_operations():
        if op.type == "Const" and op.get_attr("dtype") == tf.string:
            paths = (value.decode("utf-8", "replace") for value in tf.make_ndarray(op.get_attr("value")).ravel())
            files += [path for path in paths if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)]
    return list(dict.fromkeys(files))


def _failing_op(error: tf.errors.OpError) -> Optional[tf.Operation]:
    """The op that raised ``error``: its own, or the op its message names in a graph a loop watched steps in."""
    if error.op is not None:
        return error.op
    named = _NODE.search(error.message)
    for graph in watched_graphs() if named else ():
        try:
            return graph.get_operation_by_name(named.group(1))
        except KeyError:
            continue
    return None


def _named_input_failure(error: tf.errors.OpError, graph: tf.Graph) -> str:
    """The reader's error, naming the damaged file (checked one by one for a damaged or truncated record)."""
    try:
        with named_read_errors(_input_files(graph), "input"):
            raise error
    except ValueError as named:
        return str(named).rstrip(".")
    except tf.errors.OpError:
        return f"reading the input failed ({tensorflow_reason(error)})"


def _what_was_saved(loop: OfficialLoop, last_step: Optional[int]) -> str:
    """The checkpoint the loop holds, and whether it is the last completed step (``last_step``, None if unknown)."""
    latest = tf.train.latest_checkpoint(loop.train_dir) if loop.train_dir else None
    if latest is None:
        return "no checkpoint was saved: rerun the same command to start over once the input is fixed"
    saved_step = int(latest.rsplit("-", 1)[1]) if latest.rsplit("-", 1)[-1].isdigit() else None
    if last_step is None or saved_step is None or saved_step >= last_step:
        return f"{loop.name} saved {latest}, its last completed step: rerun the same command to resume once the " \
               "input is fixed"
    return (f"the latest checkpoint is {latest}: the {last_step - saved_step} steps after it are lost ({loop.name} "
            "saves none when a step fails); rerun the same command to resume from it once the input is fixed")


def one_line(error: BaseException, trace: Optional[types.TracebackType]) -> Optional[str]:
    """The one sentence an uncaught ``error`` prints as, or None when it is none of the seams' (see the docstring)."""
    if isinstance(error, ONE_LINE_ERRORS):
        return str(error)
    op = _failing_op(error) if isinstance(error, tf.errors.OpError) else None
    watch = existing_step_watch(op.graph) if op is not None else None
    stage = watch.stage if watch is not None else StepStage()  # where the loop stood, read once
    # slim's loop is on the traceback; a MonitoredTrainingSession only while it was being built (then its hook's).
    loop = failed_loop(trace) or stage.loop
    if loop is None:
        return None
    restoring = isinstance(error, RuntimeError) and str(error) == "generator didn't yield" or \
        op is not None and op.type == "RestoreV2"
    if restoring:
        damaged = damaged_checkpoint_error(loop)
        return None if damaged is None else str(damaged)
    if op is None:
        return None
    divergence = read_divergence(error) if isinstance(error, tf.errors.InvalidArgumentError) else None
    if divergence is not None and divergence.check == NONFINITE_SUMMARY and watch is not None:
        try:
            watch.raise_if_diverged(error, None)
        except TrainingDivergedError as diverged:
            return str(diverged)
    if isinstance(error, DATA_ERRORS) and op.type in _READER_OP_TYPES:
        return f"{_named_input_failure(error, op.graph)}; {_what_was_saved(loop, stage.last_step)}."
    return None


def _excepthook(previous):
    def hook(kind: Type[BaseException], value: BaseException, trace: Optional[types.TracebackType]) -> None:
        line = one_line(value, trace)
        if line is None:
            previous(kind, value, trace)
            return
        sys.stdout.flush()
        print(f"error: {line}", file=sys.stderr, flush=True)
        _printed_one_line.append(line)

    hook.prints_one_line = True
    return hook


def _diagnose_while_open(error: BaseException) -> None:
    """A failed histogram summary reported to slim's Coordinator (its summary thread, the session still open):
    replay the last step's batch now, so the divergence sentence it ends in names the first inf/NaN."""
    if not isinstance(error, tf.errors.InvalidArgumentError):
        return
    divergence, op = read_divergence(error), _failing_op(error)
    watch = existing_step_watch(op.graph) if op is not None else None
    if divergence is not None and divergence.check == NONFINITE_SUMMARY and watch is not None:
        try:
            watch.diagnose_last_step()
        except (tf.errors.OpError, RuntimeError) as failed:  # the loop closed its session meanwhile
            logging.getLogger("tensorflow").info("No replay of the diverged step: %s", failed)


class _RepeatedErrors(logging.Filter):
    """At the Coordinator's INFO line for an error it will re-raise: diagnose a failed summary while the session
    is open, and drop the line (the error is printed once, where it ends). After an error line: drop TensorFlow's
    exit-time notes on ops the failed loop never ran (the line stays last)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _printed_one_line and _NEVER_USED_RECORD in str(record.msg):
            return False
        if not str(record.msg).startswith(_COORDINATOR_RECORD):
            return True
        error = record.exc_info[1] if record.exc_info else (record.args or (None,))[0]
        _diagnose_while_open(error)
        kind = error if isinstance(error, type) else type(error)
        return not issubclass(kind, (*ONE_LINE_ERRORS, TerminatedAfterSave, tf.errors.OpError))


def install_error_lines() -> None:
    """Print the seams' errors as one ``error:`` line from now on (idempotent; other errors unchanged), unless
    ``$SLIM_MP_ERROR_LINES=0``.

    Raises:
      ValueError: naming ``$SLIM_MP_ERROR_LINES`` when it holds neither 0 nor 1.
    """
    if not switched_on(ERROR_LINES_ENV, "Python's own excepthook and TensorFlow's logger as they are"):
        return
    if not getattr(sys.excepthook, "prints_one_line", False):
        sys.excepthook = _excepthook(sys.excepthook)
    logger = logging.getLogger("tensorflow")
    if not any(isinstance(existing, _RepeatedErrors) for existing in logger.filters):
        logger.addFilter(_RepeatedErrors())
