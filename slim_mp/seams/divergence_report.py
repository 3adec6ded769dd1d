"""A diverged run's ``InvalidArgumentError`` as a ``TrainingDivergedError``; one ``error:`` line if uncaught.

The in-graph checks fail a step with an ``InvalidArgumentError`` whose message holds the check's
sentence and a dump of the assert node. Every loop (ours, the step function, the hook's context
manager) turns it into a ``TrainingDivergedError`` here. In a user's script the error then passes
through ``slim.learning.train``'s Supervisor and absl's ``app.run``, which re-raise it; an uncaught
``TrainingDivergedError`` ends the output with ``error: <its sentence>`` (exit status 1) instead of
a traceback, once ``report_uncaught_divergence`` has run.
"""

import sys
import types
from typing import Callable, Optional, Type

import tensorflow as tf

from slim_mp.loss_scale import TrainingDivergedError, read_divergence


def diverged_error(error: tf.errors.OpError, step: int,
                   read_loss_scale: Callable[[], Optional[float]]) -> Optional[TrainingDivergedError]:
    """The ``TrainingDivergedError`` of a failed train ``step`` (1-based), or None when ``error`` is no divergence.

    ``read_loss_scale`` gives the loss scale then (None without loss scaling); it is called only for a divergence.
    """
    divergence = read_divergence(error) if isinstance(error, tf.errors.InvalidArgumentError) else None
    return None if divergence is None else TrainingDivergedError(divergence, step, read_loss_scale())


def _error_line_hook(previous):
    def hook(kind: Type[BaseException], value: BaseException, trace: Optional[types.TracebackType]) -> None:
        if isinstance(value, TrainingDivergedError):
            sys.stdout.flush()
            print(f"error: {value}", file=sys.stderr, flush=True)
            return
        previous(kind, value, trace)

    hook.reports_divergence = True
    return hook


def report_uncaught_divergence() -> None:
    """From now on an uncaught ``TrainingDivergedError`` prints one ``error:`` line; other errors are unchanged."""
    if not getattr(sys.excepthook, "reports_divergence", False):
        sys.excepthook = _error_line_hook(sys.excepthook)
