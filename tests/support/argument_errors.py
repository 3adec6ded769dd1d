"""Expect an ``ArgumentError`` and check both its readings: the library's arguments and a script's flags."""

import contextlib
import re
from typing import Iterator

import pytest

from slim_mp.config_fields import ArgumentError, command_line_message


@contextlib.contextmanager
def raises_naming(pattern: str) -> Iterator[pytest.ExceptionInfo]:
    """The block must raise an ``ArgumentError`` whose ``error:`` line (``command_line_message``) matches
    ``pattern``, written with flags (``--dataset_dir=...``), and whose message to a library caller matches it with
    each flag read as its argument (``dataset_dir=...``)."""
    with pytest.raises(ArgumentError) as raised:
        yield raised
    line, message = command_line_message(raised.value), str(raised.value)
    assert re.search(pattern, line), f"{pattern!r} not in the error line {line!r}"
    assert re.search(pattern.replace("--", ""), message), f"{pattern!r} (without --) not in {message!r}"
