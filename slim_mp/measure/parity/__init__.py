"""The accuracy-parity tool, in the order data flows through it.

- ``run_settings``: what every run of a comparison shares (``RunSettings``), checked before training starts.
- ``run_configs``: a run as training sees it: its ``TrainConfig``, ``EvalConfig`` and initial weights.
- ``parity_config``: what to compare (``ParityConfig``: seeds, the control, the output folder).
- ``parity_results``: the records: each step of a run, each trained and evaluated run, the result.
- ``parity_run``: trains and evaluates float32, the mixed precision and the control (float32 from
  perturbed weights) from one initial checkpoint per seed, counting the conv/matmul-class ops each
  mixed run ran low.
- ``paired_stats``: the paired gap over seeds, its 95% interval (Student's t) and equivalence verdict (TOST).
- ``parity_plot``: the training loss per step (and float16's loss scale) as ``loss_curves.png``.
- ``parity_report``: mean ± std per arm and the paired gaps as ``parity.json`` and ``parity.md``, with the plot.
"""
