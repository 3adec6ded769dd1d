"""Out of memory as one sentence, the memory this process may still use, and whether a step will fit it.

A step that does not fit ends in TensorFlow's ``ResourceExhaustedError``, Python's ``MemoryError``, or
``RuntimeError: can't start new thread`` once thread stacks no longer fit (in the graph build, the
measured placement's timing, or any step); ``memory_exhaustion`` finds it in an exception's chain
and ``out_of_memory_sentence`` says where it ran out, at which batch size and precision, and the
``benchmark.py --memory_budget_mb`` command that finds the largest batch that fits. The code that
builds a step names it (``StepSettings``) and runs it inside ``out_of_memory_named``, which raises
that sentence as an ``OutOfMemoryError``; the scripts' runner words memory that ran out elsewhere
without the step.

Some ends cannot be caught: TensorFlow's oneDNN convolution crashes (segfault) when its output
cannot be allocated, and the kernel's OOM killer ends a process of a cgroup at its limit. So before
training, where the process has a limit (``ulimit -v``; a cgroup's ``memory.max``, v1
``memory.limit_in_bytes``), ``check_step_fits`` compares what is left of it (``memory_limit``) with
TensorFlow's own static estimate of the train step's tensors at their peak (grappler's memory
model, ``estimate_peak_bytes``): a step that cannot fit is one error before the build goes on, one
that may not fit a warning.

Leaves alone: what happens when the estimate is too low (the error or crash of the step itself);
docs/operations.md says how to size the batch first.
"""

import contextlib
import dataclasses
import errno
import os
import re
import resource
from typing import Callable, Iterator, List, Optional

import tensorflow as tf
from tensorflow.core.protobuf import device_properties_pb2
from tensorflow.python.grappler import cluster as grappler_cluster
from tensorflow.python.grappler import item as grappler_item

from slim_mp.config_fields import ArgumentError, ArgumentText, argument

tf1 = tf.compat.v1

GIB = 2 ** 30
# A low-precision step's tensors at their peak, as a share of the float32 step's: at least this much (the
# pass reaches 0.47x on ResNet-50, docs/BENCHMARKS.md "Memory at the peak"), and about half.
LOW_PRECISION_SHARE = 0.4
LOW_PRECISION_TYPICAL_SHARE = 0.5
# What a step may take beyond its tensors: TensorFlow's CPU allocator grows its pool in regions of doubling
# size, so the address space it holds can reach twice what is in use (and oneDNN adds scratch memory).
ALLOCATOR_HEADROOM = 2.0
# What the memory ran out for, as TensorFlow words it, and the node it names.
_ALLOCATION = re.compile(r"OOM when allocating tensor with (shape\[[\d,]*\])")
_NODE = re.compile(r"\{\{node ([^}]+)\}\}")
_THREAD_START = "can't start new thread"
# How TensorFlow's ResourceExhaustedError words a full disk (not memory).
_DISK_FULL = (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))
# cgroup limits this large mean none (v1 writes the largest page-aligned 64-bit number).
_NO_CGROUP_LIMIT = 2 ** 62
_CGROUP_ROOT = "/sys/fs/cgroup"
_STATUS_FILE = "/proc/self/status"
# Per cgroup version: the limit file and the usage file beside it.
_CGROUP_FILES = {2: ("memory.max", "memory.current"), 1: ("memory.limit_in_bytes", "memory.usage_in_bytes")}


class StepWillNotFitError(ArgumentError):
    """The train step's tensors alone need more memory than this process has left; the message names the fix."""


class OutOfMemoryError(ArgumentError):
    """Memory ran out while a step was built or run; the message says where, at which settings, and the fix."""


@dataclasses.dataclass(frozen=True)
class MemoryLimit:
    """At most ``bytes`` for this process, set by ``source`` (``ulimit -v``, or a cgroup's file), ``used`` of it."""

    bytes: int
    source: str
    used: int

    @property
    def available(self) -> int:
        """What is left of the limit."""
        return max(0, self.bytes - self.used)

    def describe(self) -> str:
        """``2.3 GiB left of 4.0 GiB (ulimit -v)``."""
        return f"{self.available / GIB:.1f} GiB left of {self.bytes / GIB:.1f} GiB ({self.source})"


def _read_number(path: str) -> Optional[int]:
    """The integer a cgroup file holds, or None (``max``, unreadable)."""
    try:
        with open(path, encoding="ascii") as handle:
            text = handle.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def cgroup_limits(cgroup_file: str = "/proc/self/cgroup", root: str = _CGROUP_ROOT) -> List[MemoryLimit]:
    """The memory limits of this process's cgroup and of its parents, with their usage (v2 and v1 layouts)."""
    try:
        with open(cgroup_file, encoding="ascii") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    limits = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            folder, (limit_name, usage_name) = root, _CGROUP_FILES[2]
        elif "memory" in controllers.split(","):
            folder, (limit_name, usage_name) = f"{root}/memory", _CGROUP_FILES[1]
        else:
            continue
        parts = [part for part in path.split("/") if part]
        for depth in range(len(parts), -1, -1):
            group = "/".join([folder, *parts[:depth]])
            limit, used = _read_number(f"{group}/{limit_name}"), _read_number(f"{group}/{usage_name}")
            if limit is not None and limit < _NO_CGROUP_LIMIT and used is not None:
                limits.append(MemoryLimit(limit, f"{group}/{limit_name}", used))
    return limits


def _address_space_in_use() -> int:
    """This process's virtual size (``VmSize``), what ``ulimit -v`` counts; 0 where /proc does not say."""
    try:
        with open(_STATUS_FILE, encoding="ascii") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return 0


def memory_limit() -> Optional[MemoryLimit]:
    """The limit of this process that leaves it least (address space, cgroups), or None when it has none."""
    limits = cgroup_limits()
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limits.append(MemoryLimit(soft, "ulimit -v", _address_space_in_use()))
    return min(limits, key=lambda limit: limit.available, default=None)


def _says_memory_ran_out(error: BaseException) -> bool:
    """True for an error of memory that ran out (TensorFlow names a full disk ``ResourceExhaustedError`` too)."""
    if isinstance(error, tf.errors.ResourceExhaustedError):
        return not any(reason in (error.message or "") for reason in _DISK_FULL)
    return isinstance(error, MemoryError) or (isinstance(error, RuntimeError) and _THREAD_START in str(error))


def memory_exhaustion(error: BaseException) -> Optional[BaseException]:
    """The error in ``error``'s chain that says memory ran out, or None.

    The chain is the one Python's traceback shows: the cause, else the context unless suppressed
    (``raise ... from None``: an error already explained, such as a full disk, is not memory's).
    """
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if _says_memory_ran_out(error):
            return error
        error = error.__cause__ if error.__cause__ is not None or error.__suppress_context__ else error.__context__
    return None


@dataclasses.dataclass(frozen=True)
class StepSettings:
    """What sizes a step, as its caller gave it: network, batch size, precision, image size and the image size's
    argument (``train_image_size``, ``eval_image_size``, ``image_size``)."""

    model_name: str
    batch_size: Optional[int]
    precision: str
    image_size: Optional[int] = None
    image_size_argument: str = "train_image_size"

    def describe(self) -> str:
        """``resnet_v1_50 at --batch_size=64 --train_image_size=224 in bfloat16`` (its arguments marked)."""
        sizes = f"{argument('batch_size')}={self.batch_size}"
        if self.image_size is not None:
            sizes += f" {argument(self.image_size_argument)}={self.image_size}"
        return f"{self.model_name} at {sizes} in {self.precision}"

    def fix(self) -> str:
        """Lower the batch, and the ``benchmark.py`` command that finds the largest batch within a memory budget."""
        lower = argument("batch_size") if self.image_size is None else \
            f"{argument('batch_size')} (or {argument(self.image_size_argument)})"
        arguments = [f"--models={self.model_name}"]
        if self.precision != "float32":
            arguments.append(f"--precisions={self.precision}")
        if self.image_size is not None:
            arguments.append(f"--image_size={self.image_size}")
        arguments += ["--memory_budget_mb=<MiB for the step>", "--output_dir=runs/memory_fit"]
        return f"lower {lower}, or find the largest batch that fits with: python scripts/benchmark.py " + " ".join(
            arguments)


def _where(cause: BaseException) -> str:
    """Where memory ran out, from ``cause`` (``memory_exhaustion``'s answer): the allocation and node, or the kind."""
    if isinstance(cause, tf.errors.ResourceExhaustedError):
        allocation, node = _ALLOCATION.search(cause.message or ""), _NODE.search(cause.message or "")
        what = f" allocating {allocation.group(1)}" if allocation else ""
        return f"ResourceExhaustedError{what}{f' in {node.group(1)}' if node else ''}"
    if isinstance(cause, MemoryError):
        return "MemoryError"
    return "a new thread could not start"


def out_of_memory_sentence(cause: BaseException, settings: Optional[StepSettings],
                           limit: Optional[MemoryLimit]) -> str:
    """One sentence for memory that ran out (``cause``, from ``memory_exhaustion``): where, at which step settings,
    this process's limit, and how to find what fits (without ``settings``: free memory or raise the limit)."""
    limited = f"; this process may use {limit.bytes / GIB:.1f} GiB ({limit.source})" if limit else ""
    if settings is None:
        return f"out of memory ({_where(cause)}){limited}: free memory or raise the limit, then run again."
    return f"out of memory ({_where(cause)}) with {settings.describe()}{limited}; {settings.fix()}"


@contextlib.contextmanager
def out_of_memory_named(settings: StepSettings) -> Iterator[None]:
    """Raise memory that runs out inside the block (``memory_exhaustion``) as an ``OutOfMemoryError`` naming
    ``settings``, this process's limit and the fix; other errors pass through unchanged.

    Nested, the outermost names the step: it is the caller closest to what the user asked for (a parity
    run's ``image_size``, not the ``train_image_size`` it passes on)."""
    try:
        yield
    except Exception as error:  # re-raised below unless memory ran out (MemoryError is an Exception)
        cause = memory_exhaustion(error)
        if cause is None:
            raise
        raise OutOfMemoryError(out_of_memory_sentence(cause, settings, memory_limit())) from error


def estimate_peak_bytes(fetch: tf.Operation) -> int:
    """TensorFlow's static estimate (grappler's memory model, one CPU device) of the bytes the tensors of one run
    of ``fetch`` hold at their peak. ``fetch``'s graph holds nothing else that runs."""
    meta_graph = tf1.train.export_meta_graph(graph=fetch.graph)
    meta_graph.collection_def[tf1.GraphKeys.TRAIN_OP].node_list.value.append(fetch.name)
    device = device_properties_pb2.NamedDevice(name="/job:localhost/replica:0/task:0/device:CPU:0",
                                               properties=device_properties_pb2.DeviceProperties(type="CPU"))
    cluster = grappler_cluster.Cluster(devices=[device])
    try:
        peaks = cluster.DeterminePeakMemoryUsage(grappler_item.Item(meta_graph))
    finally:
        cluster.Shutdown()
    return max((peak for peak, _ in peaks.values()), default=0)


def check_step_fits(settings: StepSettings, build_step: Callable[[], tf.Operation],
                    copies: int = 1) -> Optional[ArgumentText]:
    """Before training: raise when the train step cannot fit what this process has left, warn when it may not.

    ``build_step`` builds, in a fresh default graph, one float32 train step of ``settings`` (its
    forward and backward pass); ``copies`` steps run at once (the clones). Nothing is built
    without a memory limit. The step cannot fit when its tensors alone (a low-precision step's: at
    least ``LOW_PRECISION_SHARE`` of the float32 estimate) exceed what is left; it may not when they
    and the allocator's headroom (``ALLOCATOR_HEADROOM``) do. Returns that warning (for a log line), or None.

    Raises:
      StepWillNotFitError: naming ``batch_size``, the estimate, the limit and the fix.
    """
    limit = memory_limit()
    if limit is None:
        return None
    with tf.Graph().as_default():
        estimate = copies * estimate_peak_bytes(build_step())
    low = settings.precision != "float32"
    least = estimate * (LOW_PRECISION_SHARE if low else 1.0)
    likely = ALLOCATOR_HEADROOM * estimate * (LOW_PRECISION_TYPICAL_SHARE if low else 1.0)
    if least > limit.available:
        at_least = "at least " if low else ""
        raise StepWillNotFitError(
            f"the train step of {settings.describe()} cannot fit: its tensors need {at_least}"
            f"{least / GIB:.1f} GiB at their peak (TensorFlow's estimate), and this process has {limit.describe()}; "
            f"{settings.fix()}")
    if likely > limit.available:
        return ArgumentText(f"the train step of {settings.describe()} may not fit: its tensors and the allocator's "
                            f"headroom need about {likely / GIB:.1f} GiB (TensorFlow's estimate), and this process has "
                            f"{limit.describe()}; if it runs out of memory, {settings.fix()}")
    return None
