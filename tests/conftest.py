"""Shared pytest setup: quiet TensorFlow logs, static placement, import the package from the checkout."""

import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Graph-structure tests must not depend on this machine's timings: the static tables by default
# (subprocesses inherit it); tests/test_placement.py checks the measured placement with fake timings.
os.environ.setdefault("SLIM_MP_PLACEMENT", "static")
# Where a measured placement (benchmark configurations ask for it) caches timings: not the user's cache.
os.environ.setdefault("SLIM_MP_CACHE_DIR", tempfile.mkdtemp(prefix="slim_mp_test_cache_"))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
