"""The benchmark with its variables on a parameter server: float32 and slim_mp, one process against a cluster.

One parameter-server process (the project's ``parameter_server.py``, started by ``LocalCluster``)
holds the variables; this process is the worker (its own in-process server, the sessions'
target). Per model, float32 and slim_mp (its measured placement) per precision are built twice:
in one process (``float32``, ``slim_mp_bf16``) and on the cluster (``ps_float32``,
``ps_slim_mp_bf16``), and all of them are timed interleaved as the single-process suite times its
variants (same warm-up, rounds and medians), so the cluster's speed-up is read beside the one
process's of the same run. Apart from the timed rounds (tracing slows a step): each step's first
run, traced, gives its fused kernels, and one traced step per cluster configuration after the
rounds its bytes across the wire (``slim_mp.distribute.traced_wire_traffic``).

The configurations share the one parameter server, and a server shares resource variables of one
name across sessions: each configuration's variables live in a resource container of its own (its
label and model), so the float32 and bfloat16 steps never update each other's weights; the
containers are reset once a model is done, which frees the server's memory. One server for all
(not one per configuration) keeps the machine's load alike for every configuration.

On a ``shaped`` link (``shaped_link``) the parameter server runs in a network namespace behind a
veth pair of the given bandwidth; where the machine refuses, the run says so in one line and uses
loopback.
"""

import collections
import contextlib
import dataclasses
import statistics
import time
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import tensorflow as tf
from absl import logging

from slim_mp.config_fields import ArgumentError, argument
from slim_mp.devices import DeviceInfo, precision_support
from slim_mp.distribute import ClusterLayout, make_cluster_layout, session_target, traced_wire_traffic
from slim_mp.distribute.cluster import connection_refusal
from slim_mp.distribute.local_cluster import LOOPBACK, LocalCluster
from slim_mp.graph_pass import PlacementFiles, PlacementOptions
from slim_mp.measure.benchmark import benchmark_step
from slim_mp.measure.benchmark.shaped_link import ShapedLink, ShapedLinkRefused, check_link_gbits
from slim_mp.measure.benchmark.suite import built_and_run_once
from slim_mp.measure.benchmark.suite_results import BASELINE, ClusterResult, ClusterRun, Settings, Variant
from slim_mp.timing import paired_ratio

LOOPBACK_LINK, SHAPED_LINK = "loopback", "shaped"
CLUSTER_LINKS = ("none", LOOPBACK_LINK, SHAPED_LINK)
PROCESS, CLUSTER = "process", "cluster"
LOW_PRECISION_CONFIG = "slim_mp"
PS_START_SECONDS = 180.0
_PS_LINES_KEPT = 20

Progress = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class ClusterOptions:
    """Where the parameter server sits: ``link`` is loopback or shaped (then ``link_gbits`` Gbit/s each way)."""

    link: str
    link_gbits: Optional[float] = None


def check_cluster_options(link: str, link_gbits: Optional[float], background_load: int = 0,
                          memory_budget_mb: Optional[float] = None) -> Optional[ClusterOptions]:
    """The cluster options of ``cluster=link`` (None for ``none``: the single-process benchmark).

    Raises:
      ArgumentError: an unknown link, a shaped link without a positive ``link_gbits`` or a
        ``link_gbits`` without one, or options the cluster benchmark does not run beside it (a
        background load, a memory budget).
    """
    if link not in CLUSTER_LINKS:
        raise ArgumentError(f"{argument('cluster')}={link!r} is not a layout; pass one of {', '.join(CLUSTER_LINKS)}.")
    if link == SHAPED_LINK and link_gbits is None:
        raise ArgumentError(f"{argument('cluster')}={SHAPED_LINK} needs the link's bandwidth: pass "
                            f"{argument('link_gbits')}, e.g. 1 (Gbit/s each way).")
    if link != SHAPED_LINK and link_gbits is not None:
        raise ArgumentError(f"{argument('link_gbits')}={link_gbits!r} shapes the link of {argument('cluster')}="
                            f"{SHAPED_LINK} only; pass that too, or drop {argument('link_gbits')}.")
    if link == "none":
        return None
    for name, value, unset in (("background_load", background_load, 0), ("memory_budget_mb", memory_budget_mb, None)):
        if value != unset:
            raise ArgumentError(f"{argument(name)}={value!r} is not measured by {argument('cluster')}={link} (which "
                                f"times steps and wire bytes only); drop it, or run without {argument('cluster')}.")
    return ClusterOptions(link, check_link_gbits(link_gbits) if link == SHAPED_LINK else None)


def cluster_label(variant: Variant, layout: str) -> str:
    """The timing's name: the variant's label in one process, ``ps_`` and the label on the cluster."""
    return variant.label if layout == PROCESS else f"ps_{variant.label}"


def _container(model: str, label: str) -> str:
    """The resource container of one cluster configuration's variables on the parameter server."""
    return f"{model}_{label}"


def _wait_for_parameter_server(cluster: LocalCluster, lines: Sequence[str]) -> None:
    """Return once the parameter server answers; RuntimeError with its last lines if it exits or never answers."""
    deadline = time.monotonic() + PS_START_SECONDS
    while connection_refusal(cluster.ps_hosts[0], timeout=1.0) is not None:
        code = cluster.exit_code("ps", 0)
        if code is not None or time.monotonic() > deadline:
            how = f"exited with status {code}" if code is not None else f"did not answer within {PS_START_SECONDS:g} s"
            raise RuntimeError(f"the parameter server ({cluster.ps_hosts[0]}) {how}; its last lines:\n"
                               + "\n".join(lines))
        time.sleep(0.2)


@contextlib.contextmanager
def parameter_server(ps_command: Sequence[str], link: Optional[ShapedLink]) -> Iterator[Tuple[ClusterLayout, str]]:
    """One parameter server for the ``with`` block (inside ``link``'s namespace when given): (layout, target).

    ``ps_command`` runs ``parameter_server.py`` (the cluster flags are added); this process is worker 0
    (its server starts here: ``session_target``). The server's lines go to the log; it is stopped on exit.
    """
    lines: collections.deque = collections.deque(maxlen=_PS_LINES_KEPT)

    def keep(line: str) -> None:
        lines.append(line)
        logging.info("%s", line)

    addresses = ((link.names.namespace_address, link.names.root_address) if link else (LOOPBACK, LOOPBACK))
    command = link.in_namespace(ps_command) if link else list(ps_command)
    cluster = LocalCluster(command, [], num_ps=1, num_workers=1, sink=keep, ps_address=addresses[0],
                           worker_address=addresses[1])
    cluster.start_ps(0)
    try:
        _wait_for_parameter_server(cluster, lines)
        layout = make_cluster_layout(task=0, worker_replicas=1, num_ps_tasks=1, ps_hosts=cluster.ps_hosts,
                                     worker_hosts=cluster.worker_hosts)
        yield layout, session_target(layout)
    finally:
        cluster.stop()


Built = Tuple[Dict[str, benchmark_step.BenchmarkStep], Dict[str, Tuple[Tuple[str, int], ...]]]


def _build(model: str, variants: Sequence[Variant], settings: Settings, layout: ClusterLayout, target: str,
           cache_dir: str, progress: Progress, failures: Dict[str, str]) -> Built:
    """Every variant in one process and on the cluster, by label, and the fused kernels of its first (traced) step.

    A variant that fails to build or to run its first step goes into ``failures`` (label -> reason).
    """
    steps, fusions = {}, {}
    options = PlacementOptions(PlacementFiles(cache_dir=cache_dir))
    for where in (PROCESS, CLUSTER):
        for variant in variants:
            label = cluster_label(variant, where)
            on_cluster = ({"layout": layout, "target": target, "container": _container(model, label)}
                          if where == CLUSTER else {})
            built = built_and_run_once(
                model, label,
                lambda: benchmark_step.build_benchmark_step(
                    variant.config, model, tf.as_dtype(variant.precision), settings.batch_size, settings.image_size,
                    placement_options=options, **on_cluster),
                benchmark_step.executed_fusions, failures, progress)
            if built is not None:
                steps[label], fusions[label] = built
    return steps, fusions


def benchmark_cluster_model(model: str, precisions: Sequence[str], settings: Settings, device: DeviceInfo,
                            layout: ClusterLayout, target: str, cache_dir: str,
                            progress: Progress) -> List[ClusterResult]:
    """Float32 and slim_mp per precision of ``model``, in one process and on the cluster, timed interleaved.

    Speed-ups are against float32 of the same layout. Each step's first run, traced, gives its fused
    kernels (``executed_fusions``); after the timed rounds one more traced step per cluster step gives
    its bytes across the wire.
    """
    variants = [Variant(BASELINE, BASELINE)] + [Variant(LOW_PRECISION_CONFIG, precision) for precision in precisions]
    support = precision_support(device)
    failures: Dict[str, str] = {}
    steps, fusions = _build(model, variants, settings, layout, target, cache_dir, progress, failures)
    containers = [_container(model, cluster_label(variant, CLUSTER)) for variant in variants]
    try:
        times = benchmark_step.interleaved_times(
            {label: step.session.make_callable(step.train_op) for label, step in steps.items()},
            settings.rounds, settings.warmup, progress=lambda line: progress(f"[{model}] {line}"))
        traffic = {label: traced_wire_traffic(step.session, step.train_op) for label, step in steps.items()
                   if label.startswith("ps_")}
    finally:
        for step in steps.values():
            step.session.close()
        tf.compat.v1.Session.reset(target, containers)  # the server lets go of this model's variables
    results = []
    for where in (PROCESS, CLUSTER):
        baseline = cluster_label(variants[0], where)
        for variant in variants:
            label = cluster_label(variant, where)
            native = variant.config == BASELINE or support[variant.precision].native
            if label not in steps or baseline not in steps:
                reason = failures.get(label) or f"float32 baseline failed: {failures[baseline]}"
                results.append(ClusterResult(model, label, variant, where, native, None, None, None, (),
                                             unavailable=reason))
                continue
            median = statistics.median(times[label])
            wire = traffic.get(label)
            results.append(ClusterResult(
                model, label, variant, where, native, median, settings.batch_size / median,
                paired_ratio(times[baseline], times[label]), tuple(times[label]), fusions[label],
                sent_bytes=wire.sent_by(layout.worker_device) if wire else None,
                received_bytes=wire.received_by(layout.worker_device) if wire else None,
                wire_routes=tuple(wire.as_json()["routes"]) if wire else ()))
            if wire:
                progress(f"[{model}] {label}: {results[-1].wire_bytes / 2 ** 20:.1f} MiB across the wire per step")
    return results


def run_cluster_suite(models: Sequence[str], precisions: Sequence[str], settings: Settings, device: DeviceInfo,
                      options: ClusterOptions, ps_command: Sequence[str], progress: Progress,
                      cache_dir: str) -> ClusterRun:
    """Start the parameter server (behind a shaped link when asked and allowed), benchmark every model, stop it.

    ``ps_command``: the command line of ``parameter_server.py``; ``cache_dir``: the measured placement's
    timing cache, shared by a model's one-process and cluster builds (so both decide alike).
    """
    link_note = ""
    with contextlib.ExitStack() as stack:
        link = None
        if options.link == SHAPED_LINK:
            try:
                link = stack.enter_context(ShapedLink(options.link_gbits))
            except ShapedLinkRefused as refused:
                link_note = f"the machine refused a shaped link ({refused}); ran on loopback instead"
                progress(link_note)
        layout, target = stack.enter_context(parameter_server(ps_command, link))
        where = (f"a {options.link_gbits:g} Gbit/s link ({link.names.namespace_address} in namespace "
                 f"{link.names.namespace})" if link else "loopback")
        progress(f"parameter server: {layout.ps_hosts[0]} over {where}; this process is the worker "
                 f"({layout.worker_hosts[0]})")
        results = []
        for model in models:
            results.extend(benchmark_cluster_model(model, precisions, settings, device, layout, target, cache_dir,
                                                   progress))
    return ClusterRun(device, precision_support(device), settings, tuple(precisions),
                      SHAPED_LINK if link else LOOPBACK_LINK, options.link_gbits if link else None, tuple(results),
                      link_note)
