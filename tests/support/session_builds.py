"""What one test session makes once for all its pytest-xdist workers: files and folders in ``$SLIM_MP_TEST_BUILDS_DIR``.

The conftest sets the folder before the workers start (a new one for every session, never one left
from an earlier session's code). The first worker to need an item makes it under a file lock while
any other waits for the lock, then every worker reads it: a network's factory build
(``reference.factory_build``), the trained LeNet of the script tests (``script_runs.trained_lenet``).
An item is read-only once made.
"""

import fcntl
import functools
import os
import shutil
import tempfile
from typing import Callable

BUILDS_DIR_ENV = "SLIM_MP_TEST_BUILDS_DIR"


@functools.lru_cache(maxsize=1)
def builds_dir() -> str:
    """The session's shared folder; a fresh one for this process when no conftest set it."""
    return os.environ.get(BUILDS_DIR_ENV) or tempfile.mkdtemp(prefix="slim_mp_test_builds_")


def made_once(name: str, make: Callable[[str], None]) -> str:
    """The path of the session's item ``name``, which ``make(path)`` writes unless a worker has already.

    ``make`` may write the path as a file or a folder, and files beside it named ``<path>.<suffix>``.
    What a failed ``make`` left is removed before the next worker tries again.
    """
    path = os.path.join(builds_dir(), name)
    done = f"{path}.done"
    with open(f"{path}.lock", "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not os.path.exists(done):
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)
            make(path)
            open(done, "w", encoding="utf-8").close()
    return path
