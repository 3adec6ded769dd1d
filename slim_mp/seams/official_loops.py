"""The official loops the user seams run in: tf_slim's ``learning.train`` and ``MonitoredTrainingSession``.

A seam is handed a session and little else. What it needs besides (the train dir the user gave the
loop: slim's ``logdir``, ``MonitoredTrainingSession``'s ``checkpoint_dir``; whether this process is
the chief; slim's Supervisor, to stop it) is in the loop function's own frame: on the call stack
while the loop runs a seam, and on the traceback of an error the loop let through. Frames are told
by the identity of the loop function's code and read by its documented argument names (and slim's
``sv``, the Supervisor ``learning.train`` runs), so a plain ``Session`` loop simply has none.
"""

import dataclasses
import sys
import types
from typing import Optional

import tensorflow as tf
import tf_slim

from slim_mp.config_fields import argument

# (the loop's function, its name in messages, the argument naming its train dir)
_LOOPS = (
    (tf_slim.learning.train, "slim.learning.train", "logdir"),
    (tf.compat.v1.train.MonitoredTrainingSession, "MonitoredTrainingSession", "checkpoint_dir"),
)


@dataclasses.dataclass(frozen=True)
class OfficialLoop:
    """An official loop of this process: its name, its train dir and the argument that named it, the chief.

    ``coordinator`` is the Coordinator of slim's Supervisor (None for ``MonitoredTrainingSession``).
    """

    name: str
    argument: str
    train_dir: Optional[str]
    is_chief: bool
    coordinator: Optional[tf.compat.v1.train.Coordinator] = None

    @property
    def writes_checkpoints(self) -> bool:
        """True when this process saves the loop's checkpoints: the chief of a loop given a train dir."""
        return self.is_chief and bool(self.train_dir)

    def names_train_dir(self) -> str:
        """``logdir=/path``: the train dir as the user passed it (the argument marked, for an ``ArgumentError``)."""
        return f"{argument(self.argument)}={self.train_dir}"


def _loop_of(frame: types.FrameType) -> Optional[OfficialLoop]:
    for function, name, train_dir_argument in _LOOPS:
        if frame.f_code is function.__code__:
            arguments = frame.f_locals
            supervisor = arguments.get("sv")
            return OfficialLoop(name, train_dir_argument, arguments.get(train_dir_argument) or None,
                                bool(arguments.get("is_chief", True)), getattr(supervisor, "coord", None))
    return None


def running_loop() -> Optional[OfficialLoop]:
    """The official loop whose run called this (the innermost on the call stack), or None (a plain loop)."""
    frame = sys._getframe(1)
    while frame is not None:
        loop = _loop_of(frame)
        if loop is not None:
            return loop
        frame = frame.f_back
    return None


def failed_loop(trace: Optional[types.TracebackType]) -> Optional[OfficialLoop]:
    """The official loop an uncaught error came out of (the innermost on its traceback), or None."""
    found = None
    while trace is not None:
        found = _loop_of(trace.tb_frame) or found
        trace = trace.tb_next
    return found
