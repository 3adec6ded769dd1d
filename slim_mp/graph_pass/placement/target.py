"""Where the step will run, as one value: the device, the session's graph options, training or inference.

The painting (device type), the op micro-benchmarks and the whole-step copies (device scope and
session options) and the timing cache's key all take it from here, so nothing is timed somewhere
else than where the graph will run: a clone's device (on the CPU with ``clone_on_cpu``, or a GPU), a
cluster's session options (grappler's remapper off for bfloat16), an inference graph's forward-only
step (evaluation, export) rather than a training step.
"""

import collections
import dataclasses
import hashlib
from typing import Iterable, Optional

import tensorflow as tf
from tensorflow.core.protobuf import config_pb2

from slim_mp.devices import DEVICE_KINDS, detect_device


@dataclasses.dataclass(frozen=True)
class MeasuringTarget:
    """Where the step will run.

    ``device``: a TensorFlow device string (``/device:CPU:0``, ``/job:worker/task:0/device:GPU:1``; the
    job part is dropped for timing, which runs in this process); None: where the rewritten ops are
    placed (``op.device``), else TensorFlow's default. ``session_config``: the session's options; its
    ``graph_options`` (grappler's rewriters) and thread counts apply to the timing sessions (device
    filters and cluster settings do not). ``training``: time forward and backward (the step of a
    training run) or forward only (evaluation, export). ``frozen_weights``: the graph is served with its
    weights frozen into constants (an export): a weight's cast to low precision is made once, when the
    graph is written, so the estimate charges it nothing and the whole steps hold their weights as
    constants, stored low where their layer reads them low (``candidate_step``).
    """

    device: Optional[str] = None
    session_config: Optional[config_pb2.ConfigProto] = None
    training: bool = True
    frozen_weights: bool = False

    def __post_init__(self) -> None:
        if self.frozen_weights and self.training:
            raise ValueError("frozen_weights describes a served graph: it needs training=False")

    def placed(self, ops: Iterable[tf.Operation]) -> "MeasuringTarget":
        """This target, its device the one most of ``ops`` are placed on when it names none.

        (The most common: variables and their reads may sit elsewhere, e.g. on the CPU beside GPU clones.)
        """
        if self.device is not None:
            return self
        counts = collections.Counter(op.device for op in ops if op.device)
        return dataclasses.replace(self, device=counts.most_common(1)[0][0] if counts else "")

    def local_device(self) -> str:
        """The device of this process that stands for ``device`` (``/device:GPU:1``), "" for the default."""
        spec = tf.DeviceSpec.from_string(self.device or "")
        if not spec.device_type:
            return ""
        return f"/device:{spec.device_type.upper()}:{spec.device_index or 0}"

    def device_type(self) -> Optional[str]:
        """``CPU`` or ``GPU`` when ``device`` names one, else None (the caller detects the default)."""
        kind = tf.DeviceSpec.from_string(self.device or "").device_type
        return kind.upper() if kind and kind.upper() in DEVICE_KINDS else None

    def timing_config(self) -> Optional[config_pb2.ConfigProto]:
        """The options of the timing sessions: ``session_config``'s graph options and thread counts only."""
        if self.session_config is None:
            return None
        config = config_pb2.ConfigProto(
            intra_op_parallelism_threads=self.session_config.intra_op_parallelism_threads,
            inter_op_parallelism_threads=self.session_config.inter_op_parallelism_threads)
        config.graph_options.CopyFrom(self.session_config.graph_options)
        return config

    def session(self, graph: tf.Graph) -> tf.compat.v1.Session:
        """A timing session of ``graph`` with ``timing_config()``."""
        return tf.compat.v1.Session(graph=graph, config=self.timing_config())

    def op_timing_config(self) -> config_pb2.ConfigProto:
        """The options of the micro-benchmarks' session: ``timing_config()``, grappler off on a CPU.

        Why off there: an op alone with its gradient gives grappler nothing to rewrite on a CPU (the
        same kernels run, oneDNN's included: that rewrite is not grappler's), yet its pass over each
        of a ResNet-50's ~60 small timing graphs cost ~1.5 s of the cold pass. On a GPU it stays on:
        its layout optimizer changes which convolution kernel runs.
        """
        config = self.timing_config() or config_pb2.ConfigProto()
        if (self.device_type() or detect_device().kind) == "CPU":
            config.graph_options.rewrite_options.disable_meta_optimizer = True
        return config

    def op_session(self, graph: tf.Graph) -> tf.compat.v1.Session:
        """The micro-benchmarks' session of ``graph``, with ``op_timing_config()``."""
        return tf.compat.v1.Session(graph=graph, config=self.op_timing_config())

    def describe(self) -> str:
        """The cache key's device part: the device model, the local device, the options, the kind of step."""
        detected = detect_device()
        kind = self.device_type() or detected.kind
        model = detected.describe() if kind == detected.kind else f"{kind} beside {detected.describe()}"
        config = self.timing_config()
        options = hashlib.sha1(config.SerializeToString(deterministic=True)).hexdigest()[:12] if config else "default"
        step = "training" if self.training else "inference" + (", weights frozen" if self.frozen_weights else "")
        return f"{model} | {self.local_device() or 'default device'} | session {options} | {step}"
