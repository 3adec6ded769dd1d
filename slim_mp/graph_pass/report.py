"""What a rewrite did (or, with ``dry_run``, would do), as text for people and a dict for programs."""

import collections
import dataclasses
from typing import Any, Callable, Dict, List, Optional, Tuple

from slim_mp.config_fields import ArgumentText
from slim_mp.graph_pass.conversions import Conversion
from slim_mp.graph_pass.placement.plan import PlacementPlan
from slim_mp.graph_pass.placement.served_batches import batch_words

_MAX_NAMES = 5


@dataclasses.dataclass
class RewriteReport:
    """Result of ``slim_mp.rewrite``.

    ``remap(x)`` maps tensors or ops the caller still holds (a tensor, an op, or nested
    lists/tuples/dicts such as ``end_points``) to those that compute them after the rewrite,
    each tensor keeping its dtype (a float32 tensor comes back as a cast of the new value).
    ``warnings`` name what the caller can change marked (``config_fields.argument``): ``summary`` and
    ``to_dict`` read them as library arguments, ``summary_text`` leaves a script's log to name its flags.
    """

    precision: str
    device_type: str
    dry_run: bool
    ops_considered: int
    ops_converted: int
    class_counts: Dict[str, Dict[str, Tuple[int, int]]]
    conversions: List[Conversion]
    float32_ops: Dict[str, List[str]]
    unlisted_op_types: Dict[str, int]
    warnings: List[str]
    seconds: float
    placement: Optional[PlacementPlan] = None
    _remap: Optional[Callable[[Any], Any]] = dataclasses.field(default=None, repr=False)

    @property
    def casts(self) -> List[Conversion]:
        """Casts on the path of some consumer (views for held tensors not included)."""
        return [c for c in self.conversions if c.kind == "cast"]

    @property
    def folded_constants(self) -> List[Conversion]:
        return [c for c in self.conversions if c.kind == "constant"]

    @property
    def views(self) -> List[Conversion]:
        """Float32 casts made for tensors held in collections or passed to ``remap``."""
        return [c for c in self.conversions if c.kind == "view"]

    def cast_bytes_per_step(self) -> Optional[int]:
        """Bytes the inserted casts read and write per step, or None if some shape is dynamic."""
        sizes = [c.bytes_per_step for c in self.casts]
        return None if any(s is None for s in sizes) else sum(sizes)

    def remap(self, structure: Any) -> Any:
        if self._remap is None:
            raise ValueError("remap() needs a report of a real rewrite; this one is a dry run.")
        return self._remap(structure)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready summary (no TensorFlow objects)."""
        result = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.name.startswith("_")}
        result["conversions"] = [dataclasses.asdict(c) for c in self.conversions]
        result["warnings"] = [str(ArgumentText(warning)) for warning in self.warnings]
        result["placement"] = self.placement.as_json() if self.placement else None
        result["class_counts"] = {
            c: {t: {"converted": n, "seen": m} for t, (n, m) in types.items()}
            for c, types in self.class_counts.items()
        }
        result["casts_inserted"] = len(self.casts)
        result["constants_folded"] = len(self.folded_constants)
        result["views"] = len(self.views)
        result["cast_bytes_per_step"] = self.cast_bytes_per_step()
        return result

    def summary(self) -> str:
        """A few readable lines: what was converted, where casts went, what stayed float32 and why."""
        return str(self.summary_text())

    def summary_text(self) -> ArgumentText:
        """``summary`` as an ``ArgumentText``: a script logs it, and its warnings then name the script's flags."""
        verb = "would convert" if self.dry_run else "converted"
        to_low = sum(1 for c in self.casts if c.dtype == self.precision)
        lines = [
            f"slim_mp {verb} {self.ops_converted}/{self.ops_considered} float ops to {self.precision} "
            f"on {self.device_type} in {self.seconds:.2f}s; casts: {len(self.casts)} "
            f"({to_low} to {self.precision}, {len(self.casts) - to_low} to float32), "
            f"{len(self.folded_constants)} constants folded, "
            f"{len(self.views)} float32 views of held tensors",
        ]
        if self.placement is not None:
            lines.append(_placement_line(self.placement, self.precision))
        moved = self.cast_bytes_per_step()
        if moved is not None:
            lines.append(f"  cast traffic per step: {moved / 2**20:.2f} MiB")
        for op_class, types in self.class_counts.items():
            parts = [f"{t} {n}/{m}" for t, (n, m) in types.items()]
            lines.append(f"  {op_class}: " + ", ".join(parts))
        for reason, names in sorted(self.float32_ops.items(), key=lambda item: -len(item[1])):
            shown = ", ".join(names[:_MAX_NAMES]) + (" ..." if len(names) > _MAX_NAMES else "")
            lines.append(f"  float32 ({reason}): {len(names)} ops: {shown}")
        if self.unlisted_op_types:
            listed = ", ".join(f"{t} x{n}" for t, n in sorted(self.unlisted_op_types.items()))
            lines.append(f"  unlisted op types kept float32 (classify them to convert): {listed}")
        lines.extend(f"  WARNING: {w}" for w in self.warnings)
        return ArgumentText("\n".join(lines))


def _placement_line(plan: PlacementPlan, precision: str) -> str:
    """One line on the measured placement: what was timed and at which shapes (or that nothing was, and why),
    ops kept float32, estimated step, where the decision came from."""
    if not plan.timed:
        return f"  placement: {plan.source}"
    shapes = batch_words(plan.timed_batches) if plan.timed_batches else "the graph's shapes"
    every = " at every batch" if len(plan.timed_batches) > 1 else ""
    line = (f"  placement: measured ({plan.source}; timed: {plan.timed_step} steps at {shapes}), "
            f"{len(plan.float32_ops)} timed ops kept float32 as slower in {precision} on this device, "
            f"{len(plan.low_ops)} measured faster{every}")
    if plan.gradient_kernels:
        kernels = plan.gradient_kernels.counts()
        line += ("; gradients not in " + precision + ": "
                 + ", ".join(f"{count} {kernel}" for kernel, count in sorted(kernels.items())))
    estimates = (plan.estimated_ms, plan.static_estimated_ms, plan.float32_estimated_ms)
    largest = f" at batch {plan.timed_batches[-1]}" if plan.timed_batches else ""
    if None not in estimates:
        line += (f"; estimated{largest} {plan.estimated_ms:.1f} ms vs {plan.static_estimated_ms:.1f} ms "
                 f"with the static lists and {plan.float32_estimated_ms:.1f} ms all in float32")
    if plan.check is not None:
        line += f"; {plan.check.summary()}{largest}"
    return line + f"; {plan.seconds:.2f}s"


def group_float32_ops(entries: List[Tuple[str, str]]) -> Dict[str, List[str]]:
    """Group (op name, reason) pairs by reason."""
    grouped: Dict[str, List[str]] = collections.defaultdict(list)
    for name, reason in entries:
        grouped[reason].append(name)
    return dict(grouped)
