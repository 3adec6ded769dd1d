"""What an uncaught error of a user's loop prints once ``import slim_mp`` ran: one ``error:`` line for the seams'.

The official loops' own paths to these lines run as a user runs them in tests/compat/
(test_user_loop_faults.py, test_user_seams_script.py); here the excepthook and the Coordinator's
log filter are called directly.
"""

import logging
import sys

import pytest
import tensorflow as tf

from slim_mp.train_dir.folder_lock import TrainDirInUseError
from slim_mp.loss_scale import NONFINITE_LOSS, TrainingDivergedError
from slim_mp.seams.error_lines import ERROR_LINES_ENV, install_error_lines

tf1 = tf.compat.v1


@pytest.fixture
def hooked(monkeypatch):
    """The excepthook chained onto a recording one: ``(hook, calls the previous hook received)``."""
    previous_calls = []
    monkeypatch.setattr(sys, "excepthook", lambda *args: previous_calls.append(args))
    install_error_lines()
    return sys.excepthook, previous_calls


def test_the_seams_errors_print_as_one_line_and_others_reach_the_previous_hook(hooked, capsys):
    hook, previous_calls = hooked
    diverged = TrainingDivergedError(NONFINITE_LOSS, 7, None)
    in_use = TrainDirInUseError("logdir=/x is in use by another training process (pid 1 on host h); ...")
    for error in (diverged, in_use):
        hook(type(error), error, None)
    other = KeyError("not ours")
    hook(KeyError, other, None)
    assert capsys.readouterr().err.splitlines() == [f"error: {diverged}", f"error: {in_use}"]
    assert previous_calls == [(KeyError, other, None)]


def test_installing_twice_chains_one_hook(hooked):
    hook, _ = hooked
    install_error_lines()
    assert sys.excepthook is hook


def test_opting_out_installs_neither_the_hook_nor_the_logger_filter(monkeypatch):
    """``$SLIM_MP_ERROR_LINES=0`` (before ``import slim_mp``, whose seams call ``install_error_lines``)."""
    python_hook = lambda *args: None  # noqa: E731  (stands for Python's own)
    monkeypatch.setattr(sys, "excepthook", python_hook)
    logger = logging.getLogger("tensorflow")
    monkeypatch.setattr(logger, "filters", [])
    monkeypatch.setenv(ERROR_LINES_ENV, "0")
    install_error_lines()
    assert sys.excepthook is python_hook and logger.filters == []
    monkeypatch.setenv(ERROR_LINES_ENV, "1")
    install_error_lines()
    assert getattr(sys.excepthook, "prints_one_line", False) and len(logger.filters) == 1
    monkeypatch.setenv(ERROR_LINES_ENV, "off")
    with pytest.raises(ValueError, match=r"^\$SLIM_MP_ERROR_LINES='off' is neither 0 nor 1; set it to 0"):
        install_error_lines()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_the_coordinator_does_not_log_again_an_error_it_will_raise(hooked):
    records = _Records()
    logger = logging.getLogger("tensorflow")
    logger.addHandler(records)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        for error in (TrainingDivergedError(NONFINITE_LOSS, 3, None), KeyError("a user's error")):
            coordinator = tf1.train.Coordinator()
            try:
                raise error
            except (TrainingDivergedError, KeyError):
                coordinator.request_stop(sys.exc_info())
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)
    reported = [message for message in records.messages if "Error reported to Coordinator" in message]
    assert len(reported) == 1 and "a user's error" in reported[0]
