"""``make demo``: float32 against mixed precision on the bundled Fashion-MNIST, within a fixed time budget.

The pieces behind ``scripts/demo.py``, in the order the demo uses them:

- ``workload``: what is trained and timed (CifarNet, the dataset, image sizes, batch, seed).
- ``recorded_runs``: the demo runs the documents report, the one source of their figures; the
  native figures the demo quotes where it cannot time them.
- ``speed``: the device's lines, then float32 and mixed-precision train steps timed interleaved.
- ``budget``: the time-budget planner: whether the 128x128 timing fits, how many steps train.
- ``training_runs``: both precisions trained from scratch, each in a fresh process, evaluated; the table.

What the demo prints, and its runs on three CPUs: docs/operations.md, "The demo".
"""
