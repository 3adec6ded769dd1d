"""The step profiler, in the order data flows through it.

- ``step_profile``: op times, work and the live tensors at the memory peak of one traced step,
  read from TensorFlow's step stats.
- ``step_parallelism``: how parallel a traced step ran, its critical path, idle core time and the
  ops that ran alone, from the same step stats.
- ``profile_run``: builds the training script's own step from a ``TrainConfig`` in float32 and in
  mixed precision and profiles the two taking turns.
- ``device_peak``: this device's attainable GFLOP/s per precision (measured once, cached).
- ``profile_report``: both profiles as ``profile.md``, ``profile.json`` and ``profile.png``.
"""
