"""The training loop of ``train_image_classifier.py``: resume, fine-tune, log, summarise, checkpoint atomically.

Every worker of a cluster runs it; only the chief (task 0) writes checkpoints, summaries and the
pass report. All stop when the global step reaches ``--max_number_of_steps``.
"""

import dataclasses
import time
from typing import Callable, Dict, Optional

import tensorflow as tf
from absl import logging

from slim_mp.training.checkpoint_io import atomic_save
from slim_mp.distribute.cluster import session_target
from slim_mp.training.model_setup import prepare_output_dir
from slim_mp.training.nonfinite_watch import NonfiniteWatch
from slim_mp.training.precision_flags import write_rewrite_reports
from slim_mp.training.progress import Throughput, format_progress
from slim_mp.training.session_start import SessionInit, start_session
from slim_mp.training.train_config import TrainConfig, check_train_config, cluster_layout
from slim_mp.training.train_graph import TrainGraph, build_train_graph

tf1 = tf.compat.v1

# Called after every train step with that step's progress values (step, loss, learning_rate, loss_scale, skipped).
StepCallback = Callable[[Dict[str, float]], None]


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """How a run ended: the global step, the last loss, throughput (first step excluded), the last checkpoint.

    ``checkpoint`` is None on workers other than the chief, which write none.
    """

    global_step: int
    loss: Optional[float]
    images_per_second: Optional[float]
    checkpoint: Optional[str]


def _restore_or_initialise(built: TrainGraph, train_dir: str) -> SessionInit:
    """The chief's init: restore ``train_dir``'s latest checkpoint (step, weights, loss-scale state), or fine-tune."""

    def initialise(session: tf1.Session) -> None:
        latest = tf.train.latest_checkpoint(train_dir)
        if latest:
            try:
                built.saver.restore(session, latest)
            except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as error:
                raise ValueError(
                    f"--train_dir={train_dir} holds checkpoint {latest}, made for a different model or precision "
                    f"({type(error).__name__}); pass a new --train_dir to start over."
                ) from error
            logging.info("Resuming from %s", latest)
            return
        session.run(built.session_ops.global_init)
        if built.init_fn is not None:
            built.init_fn(session)

    return initialise


def train(config: TrainConfig, print_line: Callable[[str], None] = print,
          on_step: Optional[StepCallback] = None) -> TrainResult:
    """Train as ``config`` says until ``max_number_of_steps`` (or Ctrl-C, which saves a checkpoint and re-raises).

    Progress lines go to ``print_line``; the chief writes checkpoints and TensorBoard events to
    ``config.train_dir``; ``on_step``, when given, receives every step's progress values (for loss
    curves without parsing lines).
    """
    check_train_config(config)
    layout = cluster_layout(config)
    if layout.is_chief:
        prepare_output_dir(config.train_dir, "--train_dir")
    target = session_target(layout)
    built = build_train_graph(config, layout)
    reports = getattr(built.optimizer, "rewrite_reports", [])
    for report in reports:
        logging.info("%s", report.summary())
    if config.precision_options.mp_report and layout.is_chief:
        write_rewrite_reports(reports, config.precision_options.mp_report)
    with built.graph.as_default():
        started = start_session(
            built.session_ops, layout.is_chief, target,
            layout.session_config(bfloat16=config.precision_options.precision == "bfloat16"),
            _restore_or_initialise(built, config.train_dir),
        )
        built.graph.finalize()
        writer = _summary_writer(built, config.train_dir) if layout.is_chief else None
        try:
            if built.input_feed is not None:
                built.input_feed.initialize(started.session)
            return _loop(built, started.session, writer, config, print_line, on_step, layout.is_chief)
        finally:
            if writer is not None:
                writer.close()
            started.close()


def _summary_writer(built: TrainGraph, train_dir: str) -> tf1.summary.FileWriter:
    """The chief's TensorBoard writer; its events file starts with the training graph as rewritten by the pass."""
    return tf1.summary.FileWriter(train_dir, graph=built.graph)


def _loop(built: TrainGraph, session: tf1.Session, writer: Optional[tf1.summary.FileWriter], config: TrainConfig,
          print_line: Callable[[str], None], on_step: Optional[StepCallback], is_chief: bool) -> TrainResult:
    """Run train steps; log, summarise and checkpoint (chief) on their schedules; save at the end or on Ctrl-C."""
    step = int(session.run(built.global_step))
    values = None
    throughput = Throughput(built.images_per_step)
    last_save, last_summary = time.monotonic(), -float("inf")  # summaries from the first step on
    iterations = 0
    watch = NonfiniteWatch(getattr(built.optimizer, "nonfinite_probes", []))
    try:
        with built.dataset.read_errors():  # a damaged input file becomes a ValueError naming it
            while config.max_number_of_steps is None or step < config.max_number_of_steps:
                now = time.monotonic()
                summary_due = writer is not None and now - last_summary >= config.save_summaries_secs
                fetches = dict(built.progress, summary=built.summary_op) if summary_due else built.progress
                feed = watch.capture(session)
                with watch.explaining_failure(session, feed):
                    values = session.run(fetches, feed_dict=feed or None)
                watch.after_step(session, values, feed)
                throughput.step_done()
                iterations += 1
                step = int(values["step"])
                if on_step is not None:
                    on_step({key: float(values[key]) for key in built.progress})
                if summary_due:
                    writer.add_summary(values["summary"], step)
                    last_summary = now
                if iterations % config.log_every_n_steps == 0:
                    print_line(_progress_line(values, throughput.rate()))
                if is_chief and time.monotonic() - last_save >= config.save_interval_secs:
                    atomic_save(built.saver, session, config.train_dir, step)
                    last_save = time.monotonic()
    except KeyboardInterrupt:
        if is_chief:
            step = int(session.run(built.global_step))  # the interrupted run() may or may not have finished
            checkpoint = atomic_save(built.saver, session, config.train_dir, step)
            logging.info("Interrupted at step %d; saved %s", step, checkpoint)
        raise
    if values is not None and iterations % config.log_every_n_steps != 0:
        print_line(_progress_line(values, throughput.rate()))
    # The chief saves the final step (a no-op if already saved); other workers leave checkpoints to it.
    checkpoint = atomic_save(built.saver, session, config.train_dir, step) if is_chief else None
    return TrainResult(
        global_step=step,
        loss=None if values is None else float(values["loss"]),
        images_per_second=throughput.run_rate(),
        checkpoint=checkpoint,
    )


def _progress_line(values: dict, images_per_second: float) -> str:
    """Format the fetched progress values as one key=value line."""
    return format_progress(
        int(values["step"]), float(values["loss"]), float(values["loss_scale"]), int(values["skipped"]),
        float(values["learning_rate"]), images_per_second,
    )
