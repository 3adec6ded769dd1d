"""Side-by-side train-step timing of float32, slim_mp, grappler's AMP and an all-low-precision floor.

``slim_mp`` is the pass with its default measured placement, ``slim_mp_static`` the pass with the
static op lists (every allow op low).

Every configuration is built in its own graph and session inside one process (or, given a
cluster layout, with its variables on the parameter servers and its session on a worker), then timed
interleaved (A, B, C, D, B, C, D, A, ...) so that machine noise hits all of them alike. Results:
the median step time per configuration, and per pair the median of the round-by-round ratios
(``slim_mp.timing.paired_ratio``).
Used by ``scripts/benchmark_rewrite.py`` and, through ``slim_mp.measure.benchmark.suite``, ``scripts/benchmark.py``.
"""

import collections
import dataclasses
import statistics
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2

import slim_mp
from nets import nets_factory
from slim_mp.devices import device_type
from slim_mp.distribute import ClusterLayout, form_worker_fusions
from slim_mp.graph_pass import Placement, PlacementOptions, PlacementPlan
from slim_mp.loss_scale import unfolded_slot_initializers
from slim_mp.op_families import fusion_name
from slim_mp.timing import RoundOrder, interleaved_ms

CONFIGS = ("float32", "slim_mp", "slim_mp_static", "grappler", "floor")
# The placement each slim_mp configuration asks the pass for.
PLACEMENT_OF = {"slim_mp": Placement.MEASURED, "slim_mp_static": Placement.STATIC}


@dataclasses.dataclass
class BenchmarkStep:
    """One built configuration: a session ready to run ``train_op``."""

    name: str
    session: tf.compat.v1.Session
    train_op: tf.Operation
    pass_seconds: Optional[float] = None
    graph_casts: Optional[int] = None
    placement: Optional[PlacementPlan] = None


def _low_precision_getter(precision: tf.DType):
    """A custom getter: float32 storage, trainable weights read as ``precision`` (batch-norm params stay float32)."""
    def getter(base_getter, name, *args, **kwargs):
        kwargs["dtype"] = tf.float32
        variable = base_getter(name, *args, **kwargs)
        keep_float32 = not kwargs.get("trainable", True) or name.endswith(("/gamma", "/beta"))
        return variable if keep_float32 else tf.cast(variable, precision)
    return getter


def grappler_amp_config(precision: tf.DType, device_type: str) -> config_pb2.ConfigProto:
    """Session config that turns on grappler's auto mixed precision for ``precision`` on ``device_type``."""
    rewrite_options = rewriter_config_pb2.RewriterConfig()
    on = rewriter_config_pb2.RewriterConfig.ON
    if precision == tf.bfloat16:
        rewrite_options.auto_mixed_precision_onednn_bfloat16 = on
    elif device_type == "GPU":
        rewrite_options.auto_mixed_precision = on
    else:
        rewrite_options.auto_mixed_precision_cpu = on
    return config_pb2.ConfigProto(graph_options=config_pb2.GraphOptions(rewrite_options=rewrite_options))


def build_benchmark_step(config: str, model_name: str, precision: tf.DType, batch_size: int,
                         image_size: Optional[int], num_classes: int = 1000, seed: int = 0,
                         placement_options: Optional[PlacementOptions] = None,
                         layout: ClusterLayout = ClusterLayout(), target: str = "",
                         container: str = "") -> BenchmarkStep:
    """Build a Momentum train step of ``model_name`` for ``config``: cross-entropy + weight decay, fixed random inputs.

    Every configuration creates its slots as slim_mp's training step does (``unfolded_slot_initializers``),
    so the columns differ only in how they compute in low precision, not in a kept copy of the slots.

    ``placement_options`` go to the pass of the slim_mp configurations (e.g. a training run's
    decisions file, to time the placement that run trained with). With a distributed ``layout`` the
    variables go to its parameter servers, the session connects to ``target`` (its worker's server)
    with ``layout.session_config()``, and the workers' convolution fusions are formed first
    (``form_worker_fusions``), as the training script does. ``container``: the resource container of the
    step's variables; a parameter server shares variables of one name across sessions (and graphs) within
    one container, so steps that must not share them on one server each take a container of their own.
    """
    if config not in CONFIGS:
        raise ValueError(f"Unknown benchmark configuration {config!r}; use one of {', '.join(CONFIGS)}.")
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.device(layout.device_setter()), tf.compat.v1.container(container):
        tf.compat.v1.set_random_seed(seed)
        network_fn = nets_factory.get_network_fn(model_name, num_classes, is_training=True)
        size = image_size or network_fn.default_image_size
        rng = np.random.RandomState(seed)
        images = tf.constant(rng.uniform(-1, 1, size=[batch_size, size, size, 3]).astype(np.float32))
        labels = tf.constant(rng.randint(0, num_classes, size=[batch_size]).astype(np.int64))
        if config == "floor":
            with tf.compat.v1.variable_scope("", custom_getter=_low_precision_getter(precision)):
                logits, _ = network_fn(tf.cast(images, precision))
            logits = tf.cast(logits, tf.float32)
        else:
            logits, _ = network_fn(images)
        tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, tf.reshape(logits, [batch_size, -1]))
        # The train script's loss: the cross-entropy and the network's weight decay (which reads every weight).
        loss = tf.compat.v1.losses.get_total_loss()
        step = BenchmarkStep(config, None, None)
        if config in PLACEMENT_OF:
            report = slim_mp.rewrite(loss, precision, placement=PLACEMENT_OF[config],
                                     placement_options=placement_options)
            step.pass_seconds = report.seconds
            step.placement = report.placement
        optimizer = tf.compat.v1.train.MomentumOptimizer(0.001, 0.9)
        with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)), \
                unfolded_slot_initializers():
            step.train_op = optimizer.minimize(loss)
        step.graph_casts = sum(1 for op in graph.get_operations() if op.type == "Cast")
        session_config = grappler_amp_config(precision, device_type()) if config == "grappler" else None
        if layout.distributed:
            form_worker_fusions(graph)
            session_config = session_config or config_pb2.ConfigProto()
            session_config.MergeFrom(layout.session_config())
        step.session = tf.compat.v1.Session(target, graph=graph, config=session_config)
        step.session.run(tf.compat.v1.global_variables_initializer())
    return step


def executed_kernels(step: BenchmarkStep) -> Dict[str, int]:
    """How many nodes of each kernel TensorFlow executes for one step (after grappler's and oneDNN's rewrites:
    ``Cast``, ``_MklNativeFusedConv2D``, ...; ``slim_mp.op_families`` names their ops and fusions)."""
    options = tf.compat.v1.RunOptions(output_partition_graphs=True)
    metadata = tf.compat.v1.RunMetadata()
    step.session.run(step.train_op, options=options, run_metadata=metadata)
    return dict(collections.Counter(node.op for graph in metadata.partition_graphs for node in graph.node))


def fusions_run(kernels: Dict[str, int]) -> Tuple[Tuple[str, int], ...]:
    """The fused kernels among ``kernels`` (kernel -> nodes executed), by grappler's name, with their counts."""
    counts: Dict[str, int] = collections.Counter()
    for kernel, count in kernels.items():
        fusion = fusion_name(kernel)
        if fusion:
            counts[fusion] += count
    return tuple(sorted(counts.items()))


def executed_fusions(step: BenchmarkStep) -> Tuple[Tuple[str, int], ...]:
    """The fused kernels one traced run of ``step`` executes (``fusions_run`` of ``executed_kernels``), on every
    task of its cluster when it has one."""
    return fusions_run(executed_kernels(step))


def interleaved_times(runs: Dict[str, Callable[[], None]], rounds: int, warmup: int,
                      progress: Optional[Callable[[str], None]] = None) -> Dict[str, List[float]]:
    """Seconds per call of each named run, by the project's clock (``slim_mp.timing.interleaved_ms``):
    ``warmup`` untimed calls each, then ``rounds`` rounds in rotating order (each run goes first
    equally often). An error a run raises (an op's own ``OpError``) reaches the caller."""
    names = list(runs)

    def report(done: int, times: List[List[float]]) -> None:
        progress(f"round {done}/{rounds}: " + " ".join(
            f"{name}={statistics.median(values) / 1000.0:.3f}s" for name, values in zip(names, times)))

    rounds_ms = interleaved_ms([runs[name] for name in names], rounds, warmup=warmup, order=RoundOrder.ROTATE,
                               progress=report if progress else None)
    return {name: [ms / 1000.0 for ms in values or []] for name, values in zip(names, rounds_ms)}
