"""The cluster tests' tasks (parameter servers and workers), forked from one preloaded interpreter per test file."""

from typing import Callable, Iterator, List

import pytest

from script_runs import preloaded_tasks


@pytest.fixture(scope="module")
def task_command() -> Iterator[Callable[..., List[str]]]:
    """The command line of a cluster task, forked from this file's preloaded server.

    (``script_runs.preloaded_tasks``.)
    """
    with preloaded_tasks() as command:
        yield command
