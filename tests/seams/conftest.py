"""Fixtures of the seams' tests: the logged lines, and the process-wide handlers the seams install, undone."""

import signal
import sys
from typing import List

import pytest
from absl import logging as absl_logging


@pytest.fixture
def logged(monkeypatch) -> List[str]:
    """Every absl INFO and WARNING message, formatted, in order."""
    lines = []
    monkeypatch.setattr(absl_logging, "info", lambda message, *args, **kw: lines.append(message % args))
    monkeypatch.setattr(absl_logging, "warning", lambda message, *args, **kw: lines.append(message % args))
    return lines


@pytest.fixture(autouse=True)
def restore_excepthook_and_sigterm(monkeypatch):
    """The seams install an excepthook for divergence and a SIGTERM handler: undo both after each test."""
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)
