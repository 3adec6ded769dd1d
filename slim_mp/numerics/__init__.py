"""Numerics tools: what low precision will face (value-range audit), where inf/NaN first appeared
(non-finite origin), and how far each layer drifts from float32 (layer diff).

Rank 2: imports only ``slim_mp.precision``, ``devices``, ``compat``, ``graph_pass`` and ``loss_scale``.
"""
