"""Shared pytest setup for the whole suite.

- Quiet TensorFlow's C++ logs.
- Static placement: graph-structure tests must not depend on this machine's timings (subprocesses
  inherit it); tests/graph_pass/test_placement.py checks the measured placement with fake timings,
  and a measured placement (benchmark configurations ask for one) caches its timings in a
  temporary folder, not the user's cache.
- Import ``slim_mp`` from this checkout (not an installed copy) and the shared helpers of
  ``tests/support`` (``graph_checks``, ``nets_checks``, ``reference``, ``script_runs``,
  ``datasets_support``) as top-level modules.
- Apply the tf_slim compatibility fixes once, for every test (``slim_mp.compat.install()``), so no
  test module has to import ``slim_mp`` only for its side effect.
"""

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("SLIM_MP_PLACEMENT", "static")
os.environ.setdefault("SLIM_MP_CACHE_DIR", tempfile.mkdtemp(prefix="slim_mp_test_cache_"))

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(TESTS_DIR))
sys.path.insert(0, os.path.join(TESTS_DIR, "support"))

import slim_mp.compat  # noqa: E402

slim_mp.compat.install()
