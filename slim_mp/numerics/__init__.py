"""Numerics tools: what low precision will face (value-range audit), where inf/NaN first appeared
(non-finite origin), and how far each layer drifts from float32 (layer diff).

In the order the data flows: ``limits`` (the representable magnitudes of float16 and bfloat16),
``step_feeds`` (the batches the tools run: one feed dict, one per step, or none), the value audit
on the float32 graph before any rewrite (``value_stats``: the in-graph range statistics;
``audit_advice``: scopes to keep float32 and the loss-scale range; ``value_audit``: runs and
reports it), ``layer_diff`` (float32 against the rewritten graph, per end point), and
``nonfinite`` (the first inf/NaN of a skipped step, from a replay of its batch, or the batch's own).

Rank 2: imports only ``slim_mp.precision``, ``devices``, ``compat``, ``graph_pass`` and ``loss_scale``.
The names other packages use are exported here.
"""

from slim_mp.numerics.layer_diff import LayerDiff, layer_diff, layer_diff_markdown
from slim_mp.numerics.limits import LOG2_LOW
from slim_mp.numerics.nonfinite import (DATA_SOURCE_OP_TYPES, Nonfinite, NonfiniteInput, NonfiniteOrigin,
                                       NonfiniteProbe, graph_probes, unwatched_probes_warning, watch_probes)
from slim_mp.numerics.value_audit import AuditResult, audit, audit_markdown

__all__ = [
    "LayerDiff", "layer_diff", "layer_diff_markdown", "LOG2_LOW", "Nonfinite", "NonfiniteInput", "NonfiniteOrigin",
    "NonfiniteProbe",
    "DATA_SOURCE_OP_TYPES", "graph_probes", "unwatched_probes_warning", "watch_probes",
    "AuditResult", "audit", "audit_markdown",
]
