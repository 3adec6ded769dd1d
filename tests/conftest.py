"""Shared pytest setup: quiet TensorFlow logs, static placement, import the package from the checkout."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Graph-structure tests must not depend on this machine's timings: the static tables by default
# (subprocesses inherit it); tests/test_placement.py checks the measured placement with fake timings.
os.environ.setdefault("SLIM_MP_PLACEMENT", "static")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
