"""The one device detection of slim_mp: where ops run, and which low precisions it computes natively.

Detection (``detect_device``, ``device_type``) reads TensorFlow's GPU details or the CPU's flags;
the decisions (``precision_support``, ``preferred_low_precision``, and ``speed_outlook``, what the
measured placement can make of a precision) are pure functions of those facts, so they can be
checked on any machine:

* bfloat16 is native on CPUs with AVX512-BF16 or AMX-BF16 while TensorFlow runs its oneDNN kernels
  there (the only CPU kernels that use those instructions: with ``TF_ENABLE_ONEDNN_OPTS=0`` its own
  kernels compute bfloat16 through float32), and on GPUs of compute capability 8.0 or newer;
* float16 is native on GPUs of compute capability 7.0 or newer (tensor cores); on a CPU it is emulated.

The graph pass, the training scripts, the benchmarks and the demo all ask here.
"""

import dataclasses
import platform
from typing import Dict, FrozenSet, List, Optional, Tuple

import tensorflow as tf
from tensorflow.python.util import _pywrap_util_port

DEVICE_KINDS = ("CPU", "GPU")
# The CPU flags (as /proc/cpuinfo spells them) that matter for low-precision math.
LOW_PRECISION_CPU_FLAGS = ("avx512_bf16", "amx_bf16", "avx512_fp16", "amx_fp16")
_CPU_BFLOAT16_FLAGS = ("avx512_bf16", "amx_bf16")
# The low precisions this module judges, bfloat16 first (the order reports list them), each with the
# oldest GPU compute capability that runs it natively.
_MIN_CAPABILITY = {"bfloat16": (8, 0), "float16": (7, 0)}


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """The facts the precision decision needs: device kind, model name, CPU flags, whether TensorFlow runs
    its oneDNN kernels on the CPU (``onednn``: its default on AVX512-class x86 CPUs, or
    ``TF_ENABLE_ONEDNN_OPTS``), GPU compute capability."""

    kind: str
    name: str
    cpu_flags: FrozenSet[str] = frozenset()
    compute_capability: Optional[Tuple[int, int]] = None
    onednn: bool = True

    def __post_init__(self) -> None:
        if self.kind not in DEVICE_KINDS:
            raise ValueError(f"kind={self.kind!r} is not a device kind; use 'CPU' or 'GPU'.")
        if self.kind == "GPU" and self.compute_capability is None:
            raise ValueError("compute_capability is required for a GPU; pass it as a (major, minor) tuple.")

    def describe(self) -> str:
        """One line for logs, reports and the timing cache's key, e.g. ``GPU NVIDIA H100 (compute capability
        9.0)`` or ``CPU AMD EPYC 9B14 (avx512_bf16; oneDNN off)``: the kernels differ with oneDNN, so
        timings taken with it on are never reused with it off."""
        if self.kind == "GPU":
            major, minor = self.compute_capability
            return f"GPU {self.name} (compute capability {major}.{minor})"
        flags = ", ".join(sorted(self.cpu_flags)) or "no low-precision instructions"
        return f"CPU {self.name} ({flags}; oneDNN {'on' if self.onednn else 'off'})"

    def as_json(self) -> dict:
        """The facts as plain JSON values."""
        return {"kind": self.kind, "name": self.name, "cpu_flags": sorted(self.cpu_flags),
                "compute_capability": list(self.compute_capability) if self.compute_capability else None,
                "onednn": self.onednn, "description": self.describe()}


@dataclasses.dataclass(frozen=True)
class PrecisionSupport:
    """Whether ``precision`` runs natively on a device, and why."""

    precision: str
    native: bool
    reason: str

    def describe(self) -> str:
        """E.g. ``bfloat16: native (the CPU has avx512_bf16)``."""
        return f"{self.precision}: {'native' if self.native else 'not native'} ({self.reason})"


def _gpu_support(precision: str, capability: Tuple[int, int]) -> PrecisionSupport:
    needed = _MIN_CAPABILITY[precision]
    shown = f"compute capability {capability[0]}.{capability[1]}"
    if tuple(capability) >= needed:
        return PrecisionSupport(precision, True, f"{shown} has {precision} tensor cores")
    return PrecisionSupport(precision, False, f"emulated: {precision} tensor cores need compute capability "
                                              f"{needed[0]}.{needed[1]} or newer, this GPU has {shown}")


def _cpu_support(precision: str, cpu_flags: FrozenSet[str], onednn: bool) -> PrecisionSupport:
    if precision == "float16":
        return PrecisionSupport(precision, False, "emulated: TensorFlow's CPU kernels compute float16 in float32")
    found = " and ".join(sorted(cpu_flags.intersection(_CPU_BFLOAT16_FLAGS)))
    if found and onednn:
        return PrecisionSupport(precision, True, f"the CPU has {found}")
    if found:
        return PrecisionSupport(precision, False, f"emulated: TF_ENABLE_ONEDNN_OPTS=0 turns off TensorFlow's oneDNN "
                                                  f"kernels, the only ones that use the CPU's {found}; unset it to "
                                                  "run bfloat16 natively")
    return PrecisionSupport(precision, False, "emulated: the CPU has neither avx512_bf16 nor amx_bf16")


def precision_support(device: DeviceInfo) -> Dict[str, PrecisionSupport]:
    """For each low precision, whether ``device`` runs it natively (see the module docstring for the rules)."""
    if device.kind == "GPU":
        return {precision: _gpu_support(precision, device.compute_capability) for precision in _MIN_CAPABILITY}
    return {precision: _cpu_support(precision, device.cpu_flags, device.onednn) for precision in _MIN_CAPABILITY}


def speed_outlook(support: PrecisionSupport) -> str:
    """What the measured placement can make of ``support``'s precision, and so what speed to expect from it.

    A pure function of the support verdict, so the explanation for both kinds of device can be checked
    anywhere; it leaves the verdict's reason to ``PrecisionSupport.describe``, printed beside it.
    Native: each conv/matmul op runs low where that is faster at its shape, so the gain depends on
    the sizes (small images often gain little on a CPU). Emulated: low precision is slower than
    float32 for most ops, so the placement keeps them float32 and mixed precision runs at about
    float32's speed, which is the right outcome, not a fault.
    """
    if support.native:
        return (f"{support.precision} is native here, so the measured placement runs each conv/matmul op in "
                f"{support.precision} where it times faster at that op's shape and keeps it float32 where not; "
                "the gain grows with the work per op (larger images, wider layers).")
    return (f"{support.precision} is emulated here, so its conv/matmul ops are mostly slower than float32; "
            "the measured placement keeps those float32, and mixed precision then runs at about float32's "
            "speed (a speed-up near or below 1x is this CPU, not the pass).")


def native_precisions(device: DeviceInfo) -> List[str]:
    """The low precisions ``device`` runs natively, bfloat16 first: what a benchmark measures by default."""
    return [name for name, support in precision_support(device).items() if support.native]


def preferred_low_precision(device: DeviceInfo) -> str:
    """The low precision to train in on ``device``: float16 where it is native (tensor cores), else bfloat16."""
    return "float16" if precision_support(device)["float16"].native else "bfloat16"


def emulation_warning(precision: str, kind: str) -> Optional[str]:
    """A one-line warning when ``precision`` is float16 on a ``kind`` (``CPU``/``GPU``) that emulates it, else None.

    The decision needs only the device kind: TensorFlow's CPU kernels compute float16 through float32.
    """
    if precision == "float16" and kind == "CPU":
        return "float16 kernels on CPU are emulated and slow; use precision='bfloat16' on CPUs."
    return None


def _read_cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""


def cpu_features() -> Dict[str, bool]:
    """Which low-precision instruction sets this machine's CPU has (Linux /proc/cpuinfo; all False elsewhere)."""
    flags = set(_read_cpuinfo().split())
    return {flag: flag in flags for flag in LOW_PRECISION_CPU_FLAGS}


def _cpu_model_name() -> str:
    for line in _read_cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def onednn_enabled() -> bool:
    """Whether TensorFlow runs its oneDNN kernels in this process (``TF_ENABLE_ONEDNN_OPTS``, read once)."""
    return bool(_pywrap_util_port.IsMklEnabled())


def device_type() -> str:
    """``GPU`` when TensorFlow sees a GPU (ops then run there by default), else ``CPU``."""
    return "GPU" if tf.config.list_physical_devices("GPU") else "CPU"


def detect_device() -> DeviceInfo:
    """The device TensorFlow runs ops on by default: the first GPU if there is one, else the CPU."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        return DeviceInfo("GPU", details.get("device_name", gpus[0].name),
                          compute_capability=tuple(details["compute_capability"]))
    flags = frozenset(flag for flag, present in cpu_features().items() if present)
    return DeviceInfo("CPU", _cpu_model_name(), cpu_flags=flags, onednn=onednn_enabled())
