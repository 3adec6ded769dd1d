"""Measurement: how fast, how large and how accurate mixed precision is, one sub-package per tool.

- ``benchmark``: side-by-side train-step timing of float32, slim_mp, grappler's AMP and the
  all-low floor, with peak memory and an optional background load (``scripts/benchmark.py``).
- ``profiling``: one training step op by op, its memory peak and the device's attainable GFLOP/s
  (``scripts/profile_step.py``).
- ``parity``: float32 against mixed-precision accuracy over seeds (``scripts/parity.py``).
- ``numerics_report``: builds a zoo network from training flags, audits its values or diffs it
  layer by layer, and writes the files, drawn by ``numerics_plot``
  (``scripts/audit_precision.py``, ``scripts/compare_precision.py``).
- ``demo``: float32 against mixed precision, timed and trained within a time budget (``scripts/demo.py``).

Every report has the same verbs: ``to_dict()`` (the JSON file), ``to_markdown()`` (the Markdown
file) and ``write_reports(output_dir)`` (all of its files, their paths by kind).
"""
