"""Small graph inspection helpers for tests (independent of the code under test)."""

from typing import Dict, Iterable, List, Tuple

import tensorflow as tf

MATH_OP_TYPES = frozenset({
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter", "MatMul", "BatchMatMulV2",
    "Conv3D", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2",
})


def reachable_ops(fetches) -> List[tf.Operation]:
    """Every op that running ``fetches`` executes (data and control inputs, transitively)."""
    roots = [f if isinstance(f, tf.Operation) else f.op for f in tf.nest.flatten(fetches)]
    seen, stack = set(), list(roots)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return sorted(seen, key=lambda op: op.name)


def float32_math_ops(ops: Iterable[tf.Operation]) -> List[str]:
    """Names of conv/matmul-class ops (forward or backward) not computing in float16/bfloat16."""
    return [
        op.name for op in ops
        if op.type in MATH_OP_TYPES and op.outputs[0].dtype not in (tf.float16, tf.bfloat16)
    ]


def ops_of_type(ops: Iterable[tf.Operation], op_type: str) -> List[tf.Operation]:
    return [op for op in ops if op.type == op_type]


def softmax(logits):
    """Row-wise softmax in float64 (the reference for a network's ``Predictions``)."""
    import numpy as np

    shifted = np.exp(np.asarray(logits, np.float64) - np.max(logits, axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def _traced_steps(train_op, steps: int) -> List[tf.compat.v1.RunMetadata]:
    """Initialise ``train_op``'s graph (global and local variables), run ``steps`` traced steps: their metadata."""
    with tf.compat.v1.Session(graph=train_op.graph) as session:
        session.run([tf.compat.v1.global_variables_initializer(), tf.compat.v1.local_variables_initializer()])
        traced = []
        for _ in range(steps):
            metadata = tf.compat.v1.RunMetadata()
            session.run(train_op, options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
                        run_metadata=metadata)
            traced.append(metadata)
    return traced


def traced_op_times(train_op) -> Dict[str, Tuple[int, int]]:
    """Run one initialised, traced step of ``train_op``'s graph: each executed op's (start, end) in microseconds."""
    (metadata,) = _traced_steps(train_op, 1)
    return {stats.node_name: (stats.all_start_micros, stats.all_start_micros + stats.all_end_rel_micros)
            for device in metadata.step_stats.dev_stats for stats in device.node_stats}


def live_bytes_per_step(train_op, steps: int = 2) -> List[int]:
    """Initialise ``train_op``'s graph, run ``steps`` traced steps: the bytes each allocated and left alive.

    TensorFlow's own count (step stats' tracked allocations): a step that copies a variable's
    buffer, as an update of a slot sharing a kept constant's does, leaves the copy alive.
    """
    return [sum(memory.live_bytes for device in metadata.step_stats.dev_stats
                for node in device.node_stats for memory in node.memory)
            for metadata in _traced_steps(train_op, steps)]
