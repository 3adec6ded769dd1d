"""The accuracy tools (parity over seeds; time to accuracy side by side), in the order data flows through them.

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
- ``time_to_accuracy``: float32 and the mixed precision trained side by side in turns, each evaluated
  every N steps against its own train seconds.
- ``time_to_accuracy_report``: when each precision came within the margin of float32's final top-1,
  as a table, a JSON record and a plot of top-1 against train seconds.
"""
