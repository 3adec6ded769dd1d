"""What our loop saves when it stops early: Ctrl-C, SIGTERM, or input data that breaks mid-run.

Each ends with the chief saving the current step (atomically, ``slim_mp.train_dir``) and one error
saying what it saved, so no completed step is lost however the run stops. A data error is a
``DataLossError`` (a damaged or truncated shard), an ``InvalidArgumentError`` the divergence checks
did not raise (an undecodable image, a bad label), a ``NotFoundError`` (a shard removed, its folder
unmounted) or a ``PermissionDeniedError`` (read permission lost): the reader's mapping
(``DatasetSpec.read_errors``, ``negative_label_errors``) names the file, and the error ends with
the checkpoint. Damage found before any step of this run saves nothing: the latest checkpoint is
already its last completed step.

Leaves alone: how the file at fault is found and named (``slim_mp.datasets``, ``input_pipeline``).
"""

import contextlib
from typing import Callable, ContextManager, Iterator, Optional, Sequence, Tuple

import tensorflow as tf
from absl import logging

from slim_mp.config_fields import marked_message
from slim_mp.datasets import InputDataError
from slim_mp.seams import DATA_ERRORS, Terminated, tensorflow_reason
from slim_mp.training.step_schedule import StepSchedule


def _save_current(read_step: Callable[[], int], schedule: StepSchedule, why: str) -> Tuple[int, Optional[str]]:
    """The chief saves the current global step: ``(step, checkpoint)`` (other workers save nothing: None)."""
    if schedule.save is None:
        return schedule.step, None
    step = read_step()  # an interrupted run() may or may not have finished
    checkpoint = schedule.save(step)
    logging.info("%s at step %d; saved %s", why, step, checkpoint)
    return step, checkpoint


def _data_failure(error: Exception) -> str:
    """What the reader's mapping said (a ValueError naming the file; its arguments still marked), or the reason in
    TensorFlow's error."""
    if isinstance(error, tf.errors.OpError):
        return f"reading the input failed ({tensorflow_reason(error)})"
    return marked_message(error).rstrip(".")


@contextlib.contextmanager
def saved_on_the_way_out(read_step: Callable[[], int], schedule: StepSchedule,
                         reader_errors: Sequence[ContextManager[None]]) -> Iterator[None]:
    """Around the loop: Ctrl-C, SIGTERM or a data error saves the current step (chief), then stops with one error.

    The block runs inside ``reader_errors`` (the reader's mappings to a ValueError naming the file,
    outermost first), so a data error is saved before it is named. ``read_step`` reads the global step.

    Raises:
      Terminated: SIGTERM, its message naming the step and what was saved.
      InputDataError: (``slim_mp.datasets``'s) a data error after this run's first step, naming the file and what
        was saved.
    """
    saved = None
    try:
        with contextlib.ExitStack() as mappings:
            for mapping in reader_errors:
                mappings.enter_context(mapping)
            try:
                yield
            except DATA_ERRORS:
                if schedule.steps_run:
                    saved = _save_current(read_step, schedule, "The input failed")
                raise
    except KeyboardInterrupt as interrupt:
        step, checkpoint = _save_current(read_step, schedule, "Interrupted")
        if isinstance(interrupt, Terminated):
            what = f"saved {checkpoint}" if checkpoint else "the chief saves the checkpoints"
            raise Terminated(f"terminated by SIGTERM at step {step}; {what}; rerun the same command to resume") \
                from None
        raise
    except (ValueError, *DATA_ERRORS) as error:
        if saved is None:
            raise
        step, checkpoint = saved
        what = f"saved {checkpoint}, its last completed step (step {step})" if checkpoint else \
            "the chief saves its last completed step"
        raise InputDataError(f"{_data_failure(error)}; {what}: rerun the same command to resume once the input "
                             "is fixed.", getattr(error, "path", None)) from error
