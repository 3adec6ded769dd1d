"""The accuracy-parity tool, in the order data flows through it.

- ``parity_config``: what to compare (``ParityConfig``), every flag checked before training starts.
- ``parity_results``: the records: each step of a run, each trained and evaluated run, the result.
- ``parity_run``: trains and evaluates float32 and the mixed precision from one initial checkpoint
  per seed, counting the conv/matmul-class ops each mixed run ran low.
- ``parity_plot``: the training loss per step (and float16's loss scale) as ``loss_curves.png``.
- ``parity_report``: mean ± std per precision as ``parity.json`` and ``parity.md``, with the plot.
"""
