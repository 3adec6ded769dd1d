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

With its variables on a parameter server (``--cluster``), the same tool runs:

- ``shaped_link``: a link of a given bandwidth on this machine (a network namespace, a veth pair, ``tc``);
- ``cluster_suite``: a parameter-server process (on loopback or behind the shaped link), float32 and
  slim_mp timed interleaved in one process and on the cluster, the bytes across the wire per step;
- ``cluster_scaling``: the arithmetic from those bytes and steps to workers per link and servers per worker count;
- ``cluster_report``: that run as ``benchmark.json``, ``benchmark.md`` and ``benchmark.png``.

The serving benchmark (``scripts/benchmark_serving.py``) times exported models instead of train steps:

- ``served_models``: the files it times (frozen graphs, SavedModels), exported or given, checked and opened;
- ``serving_options``: its options and its variants (float32, the low-precision exports, grappler's AMP);
- ``serving``: opens each variant once and times them interleaved, batch size by batch size;
- ``serving_report``: the run as ``serving.json``, ``serving.md`` and ``serving.png``.
"""
