"""The training loop of ``train_image_classifier.py``: resume, fine-tune, log, summarise, checkpoint atomically.

Each step is the one watched step every loop runs (``slim_mp.seams.step_watch``, as in
``slim_mp.train_step``); around it the loop is a schedule (``step_schedule``: summaries, progress
lines, periodic saves). It differs from the seams in one way: SIGTERM stops it in place (the chief
saves the current step and the script exits 143), where a user's loop is asked to stop and saves
with its own final save. Every worker of a cluster runs it; only the chief (task 0) writes
checkpoints, summaries and the pass report. All stop when the global step reaches
``--max_number_of_steps``.
"""

import contextlib
import dataclasses
import functools
import os
import threading
import time
from typing import Callable, Iterator, Optional, Tuple

import tensorflow as tf
from absl import logging

from slim_mp.graph_pass import RewriteReport
from slim_mp.json_files import JsonFileError, read_json_file, write_json_atomically
from slim_mp.training.checkpoint_fit import check_checkpoint_complete, check_checkpoint_fits
from slim_mp.distribute import LOST_TASK_ERRORS, ClusterLayout, lost_task, session_target
from slim_mp.seams import sigterm_as_interrupt, step_watch
from slim_mp.training.input_pipeline import negative_label_errors
from slim_mp.training.live_graph import LiveGraphSaver, live_graph_def
from slim_mp.training.model_setup import prepare_output_dir
from slim_mp.training.precision_flags import write_rewrite_reports
from slim_mp.training.session_start import LOST_TASK_CLOSE_SECS, SessionInit, TrainingSession, start_session
from slim_mp.training.step_schedule import StepCallback, StepSchedule
from slim_mp.training.stop_saves import saved_on_the_way_out
from slim_mp.training.memory_fit import out_of_memory_named
from slim_mp.training.train_config import TrainConfig, check_train_config, cluster_layout, train_step_settings
from slim_mp.training.train_graph import TrainGraph, build_train_graph
from slim_mp.train_dir import (atomic_save, disk_write_errors, find_resume_checkpoint, latest_checkpoint_note,
                               latest_checkpoint_step, train_dir_lock)

tf1 = tf.compat.v1

RUN_INFO_FILENAME = "run_info.json"
_RUN_INFO_SCHEMA = {"precision": str}


class ClusterTaskLostError(ValueError):
    """A parameter server or worker of the cluster stopped answering; the message names it and what to do."""


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """How a run ended: the global step, the last loss, throughput (first step excluded), the last checkpoint,
    and what the graph pass did.

    ``checkpoint`` is None on workers other than the chief, which write none. ``rewrite_reports``: one
    per rewritten loss (empty in float32), the objects ``--mp_report`` writes as JSON.
    """

    global_step: int
    loss: Optional[float]
    images_per_second: Optional[float]
    checkpoint: Optional[str]
    rewrite_reports: Tuple[RewriteReport, ...] = ()


def _recorded_precision(train_dir: str) -> Optional[str]:
    """The precision the last run in ``train_dir`` trained in, or None if unrecorded (a damaged record: a warning)."""
    try:
        return read_json_file(os.path.join(train_dir, RUN_INFO_FILENAME), _RUN_INFO_SCHEMA)["precision"]
    except FileNotFoundError:
        return None
    except JsonFileError as error:
        logging.warning("%s; the precision of the previous run is unknown (the file is rewritten)", error)
        return None


def _record_precision(train_dir: str, precision: str) -> None:
    """Write ``train_dir/run_info.json`` naming this run's precision (replaced atomically)."""
    write_json_atomically(os.path.join(train_dir, RUN_INFO_FILENAME), {"precision": precision})


def _check_resume(built: TrainGraph, config: TrainConfig, checkpoint: str) -> None:
    """Before restoring: every variable must fit the checkpoint; warn when the precision changes."""
    with built.graph.as_default():
        variables = {v.op.name: v for v in tf1.global_variables()}
    check_checkpoint_fits(checkpoint, variables, "train_image_size")
    check_checkpoint_complete(checkpoint, variables)
    previous = _recorded_precision(config.train_dir)
    precision = config.precision_options.precision
    if previous and previous != precision:
        dropped = " (its loss-scale state is dropped)" if previous == "float16" else ""
        logging.warning("--train_dir=%s was trained in %s; resuming it in --precision=%s%s",
                        config.train_dir, previous, precision, dropped)


def _restore_or_initialise(built: TrainGraph, resume_from: Optional[str]) -> SessionInit:
    """The chief's init: restore ``resume_from`` (step, weights, loss-scale state), or initialise and fine-tune."""

    def initialise(session: tf1.Session) -> None:
        if resume_from:
            built.saver.restore(session, resume_from)
            logging.info("Resuming from %s", resume_from)
            return
        session.run(built.session_ops.global_init)
        if built.init_fn is not None:
            built.init_fn(session)

    return initialise


def train(config: TrainConfig, print_line: Callable[[str], None] = print,
          on_step: Optional[StepCallback] = None) -> TrainResult:
    """Train as ``config`` says until ``max_number_of_steps`` (or Ctrl-C or SIGTERM: the chief saves, then re-raises).

    Progress lines go to ``print_line``; the chief writes checkpoints and TensorBoard events to
    ``config.train_dir``; ``on_step``, when given, receives every step's progress values (for loss
    curves without parsing lines).
    """
    check_train_config(config)
    layout = cluster_layout(config)
    if layout.is_chief:
        prepare_output_dir(config.train_dir, "train_dir")
    with contextlib.ExitStack() as stack:
        stack.enter_context(out_of_memory_named(train_step_settings(config)))
        stack.enter_context(sigterm_as_interrupt())
        if layout.is_chief:
            stack.enter_context(_summary_thread_errors_reported_once())
            stack.enter_context(disk_write_errors(
                config.train_dir, "train_dir", lambda: latest_checkpoint_note(config.train_dir)
            ))
            stack.enter_context(train_dir_lock(config.train_dir))
        return _train(config, layout, print_line, on_step)


@contextlib.contextmanager
def _summary_thread_errors_reported_once() -> Iterator[None]:
    """Keep the summary writer's thread from printing a traceback for a failed write.

    TensorFlow's ``FileWriter`` writes from its own thread (named ``EventLoggerThread``) and raises
    the same error again in the loop's next ``add_summary`` or ``close``, which reports it in one line.
    """
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.thread is None or args.thread.name != "EventLoggerThread":
            previous(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous


def _train(config: TrainConfig, layout: ClusterLayout, print_line: Callable[[str], None],
           on_step: Optional[StepCallback]) -> TrainResult:
    """``train`` once the chief holds the lock on ``--train_dir``."""
    resume_from = find_resume_checkpoint(config.train_dir) if layout.is_chief else None
    target = session_target(layout)
    built = build_train_graph(config, layout)
    if resume_from:
        _check_resume(built, config, resume_from)
    if layout.is_chief:
        _record_precision(config.train_dir, config.precision_options.precision)
    for report in built.rewrite_reports:
        logging.info("%s", report.summary_text())
    if config.precision_options.mp_report and layout.is_chief:
        write_rewrite_reports(built.rewrite_reports, config.precision_options.mp_report)
    open_session = functools.partial(
        start_session, built.session_ops, layout.is_chief, target,
        layout.session_config(),
        _restore_or_initialise(built, resume_from),
    )
    schedule = functools.partial(StepSchedule, config, print_line=print_line, on_step=on_step)
    try:
        return _run_session(built, config, layout.is_chief, open_session, schedule)
    except LOST_TASK_ERRORS as error:
        raise _lost_task_error(error, config, layout) from None


def _lost_task_error(error: tf.errors.OpError, config: TrainConfig, layout: ClusterLayout) -> ClusterTaskLostError:
    """The one-line error for a task of the cluster that stopped answering, saying what the operator does."""
    step = latest_checkpoint_step(config.train_dir) if layout.is_chief else None
    resume = f"model.ckpt-{step}" if step is not None else "its latest checkpoint in --train_dir (if any)"
    return ClusterTaskLostError(
        f"lost contact with {lost_task(error, layout)} of the cluster ({type(error).__name__}); "
        f"restart it, then restart every worker: the chief resumes from {resume}."
    )


# Our loop's schedule around the steps, given the chief's summary writer and save (None on other workers).
ScheduleOf = Callable[[Optional[tf1.summary.FileWriter], Optional[Callable[[int], str]]], StepSchedule]


def _run_session(built: TrainGraph, config: TrainConfig, is_chief: bool, open_session: Callable[[], TrainingSession],
                 schedule: ScheduleOf) -> TrainResult:
    """Open the session (``open_session``: the chief restores or initialises), run the loop on ``schedule``, close
    the session (bounded: see ``close``)."""
    with built.graph.as_default():
        started = open_session()
        built.graph.finalize()
        # Checkpoints' .meta and TensorBoard get the live graph: no dead originals.
        live_graph = live_graph_def(built.graph, built.rewrite_reports)
        built = dataclasses.replace(built, saver=LiveGraphSaver(built.saver, built.graph, live_graph))
        writer = _summary_writer(live_graph, config.train_dir) if is_chief else None
        close_timeout = None
        try:
            if built.input_feed is not None:
                built.input_feed.initialize(started.session)
            save = functools.partial(atomic_save, built.saver, started.session, config.train_dir,
                                     max_to_keep=config.max_to_keep) if is_chief else None
            return _loop(built, started.session, schedule(writer, save))
        except LOST_TASK_ERRORS:
            close_timeout = LOST_TASK_CLOSE_SECS  # closing would wait for the lost task for ever
            raise
        finally:
            if writer is not None:
                writer.close()
            started.close(close_timeout)


def _summary_writer(graph_def: tf1.GraphDef, train_dir: str) -> tf1.summary.FileWriter:
    """The chief's TensorBoard writer; its events file starts with ``graph_def``, the live rewritten training graph.

    The graph goes in as an event of its own: ``FileWriter(graph_def=...)`` would log a deprecation warning.
    """
    writer = tf1.summary.FileWriter(train_dir)
    writer.add_event(tf1.Event(wall_time=time.time(), graph_def=graph_def.SerializeToString()))
    return writer


def _loop(built: TrainGraph, session: tf1.Session, schedule: StepSchedule) -> TrainResult:
    """Run watched steps on ``schedule`` until the last; then, or on Ctrl-C, SIGTERM or a data error, the chief saves.

    A divergence check that fires becomes a ``TrainingDivergedError`` (a ValueError: one error line);
    a damaged input file, or a label made negative by ``--labels_offset``, a ValueError naming it.
    """
    watch = step_watch(built.graph, built.global_step, built.images_per_step)
    schedule.step = int(session.run(built.global_step))
    values = None
    reader_errors = (built.dataset.read_errors(), negative_label_errors(schedule.config.labels_offset))
    with saved_on_the_way_out(lambda: int(session.run(built.global_step)), schedule, reader_errors):
        while schedule.continues():
            values = watch.step(session, schedule.fetches(built.progress, built.summary_op))
            schedule.step_done(watch, values)
    schedule.finish(watch)
    # The chief saves the final step (a no-op if already saved); other workers leave checkpoints to it.
    return TrainResult(
        global_step=schedule.step,
        loss=None if values is None else float(values["loss"]),
        images_per_second=watch.throughput.run_rate(),
        checkpoint=schedule.save(schedule.step) if schedule.save is not None else None,
        rewrite_reports=built.rewrite_reports,
    )
