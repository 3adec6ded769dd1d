"""The benchmark tool, in the order data flows through it.

- ``suite_results``: the records at the bottom: variants, settings, per-variant results, quiet
  re-timings and the whole run (plain frozen values; every other module may import them).
- ``benchmark_step``: builds one configuration's train step and times configurations interleaved.
- ``peak_memory``: one configuration's peak memory, in a fresh subprocess of its own.
- ``under_load``: busy-loop processes beside the benchmark (a context manager), and the
  quiet re-timing of placements decided under them.
- ``batch_budget``: the largest batch within a memory budget (doubling, then bisection).
- ``suite``: plans the variants, measures memory, then times every model's variants together.
- ``benchmark_report``: the run as ``benchmark.json``, ``benchmark.md`` and ``benchmark.png``.

The serving benchmark (``scripts/benchmark_serving.py``) times exported models instead of train steps:

- ``served_models``: the files it times (frozen graphs, SavedModels), exported or given, checked and opened;
- ``serving_options``: its options and its variants (float32, the low-precision exports, grappler's AMP);
- ``serving``: opens each variant once and times them interleaved, batch size by batch size;
- ``serving_report``: the run as ``serving.json``, ``serving.md`` and ``serving.png``.
"""
