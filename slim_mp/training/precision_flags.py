"""Command-line precision options (``--precision``, ``--loss_scale*``, ``--mp_*``) turned into slim_mp arguments.

Validation and meaning come from the library: precision names from ``slim_mp.precision``, loss-scale
requests and the dynamic policy from ``slim_mp.loss_scale.policy``; this module only names the flags.
"""

import dataclasses
import json
from typing import Optional, Sequence, Tuple

from slim_mp.config_fields import option
from slim_mp.graph_pass import (MeasuringTarget, PlacementFiles, PlacementMeasuring, PlacementOptions, RewriteOptions,
                                RewriteReport, default_placement, resolve_placement)
from slim_mp.json_files import write_json_atomically
from slim_mp.loss_scale import DYNAMIC, DynamicLossScale, LossScaleManager, make_loss_scale_manager, parse_loss_scale
from slim_mp.precision import precision_name

# The flags whose names differ from the library arguments they set (``--mp_debug_nonfinite`` sets
# ``enable_mixed_precision(debug_nonfinite=...)``): how a script's ``error:`` line names those arguments.
FLAG_NAMES = {"debug_nonfinite": "mp_debug_nonfinite", "placement": "mp_placement"}


@dataclasses.dataclass(frozen=True)
class PrecisionOptions:
    """Which precision to compute in, and how the graph pass treats op types and scopes.

    ``precision`` accepts every spelling ``slim_mp.precision`` does and is stored in its canonical
    form (``float32``, ``float16``, ``bfloat16``).
    """

    precision: str = option(
        "float32", "Compute precision: float32, or float16 / bfloat16 for mixed precision (float32 master weights)."
    )
    mp_allow_ops: Tuple[str, ...] = option((), "Op types to add to the mixed-precision allow list (comma-separated).")
    mp_deny_ops: Tuple[str, ...] = option((), "Op types to keep in float32 (comma-separated).")
    mp_keep_fp32_scopes: Tuple[str, ...] = option(
        (), "Name scopes whose ops stay in float32 (comma-separated), e.g. the logits layer."
    )
    mp_report: Optional[str] = option(None, "Write the graph pass's report to this JSON file.")
    mp_debug_nonfinite: bool = option(
        False, "After a step skipped for inf/NaN gradients, replay its batch and log the op where the first "
        "non-finite value appeared (forward or backward, low precision or not)."
    )
    mp_placement: str = option(
        default_placement(), "Where ops run low: measured (time conv/matmul ops on this device, keep float32 where "
        "low precision is slower; decisions saved to --train_dir/placement.json) or static (the op lists only)."
    )

    def __post_init__(self) -> None:
        try:
            canonical = precision_name(self.precision, allow_float32=True)
        except ValueError as error:
            raise ValueError(f"--precision={self.precision!r}: {error}") from error
        object.__setattr__(self, "precision", canonical)
        try:
            resolve_placement(self.mp_placement)
        except ValueError as error:
            raise ValueError(f"--mp_placement={self.mp_placement}: {error}") from error

    @property
    def mixed(self) -> bool:
        """True when the graph is to be rewritten (float16 or bfloat16)."""
        return self.precision != "float32"

    def typed_flags(self) -> Tuple[str, ...]:
        """The options that differ from their defaults, as flags a user typed (``--mp_deny_ops=Conv2D``).

        For the tools that take no graph pass (a TensorFlow Lite model's export and evaluation) and
        refuse these flags by name rather than ignore them.
        """
        default = PrecisionOptions()
        typed = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value != getattr(default, field.name):
                typed.append(f"--{field.name}={','.join(value) if isinstance(value, tuple) else value}")
        return tuple(typed)

    def rewrite_options(self, target: MeasuringTarget = MeasuringTarget(), files: PlacementFiles = PlacementFiles(),
                        serving_batch_sizes: Tuple[int, ...] = PlacementMeasuring().serving_batch_sizes
                        ) -> RewriteOptions:
        """The graph pass's options for ``slim_mp.rewrite`` / ``enable_mixed_precision`` (``options=``), the
        measured placement's built here once for the run.

        ``target``: where the step runs; ``MeasuringTarget(training=False)`` for evaluation (and with
        ``frozen_weights=True`` for export), whose placement times forward steps only, never reusing a
        training step's timings. ``files``: the run's decisions file and how it is shared (training:
        ``train_dir``'s, written by the chief).
        ``serving_batch_sizes``: the batches an inference graph of unknown batch (an export's) is timed at.
        """
        placement_options = PlacementOptions(files, PlacementMeasuring(target=target,
                                                                       serving_batch_sizes=serving_batch_sizes))
        return RewriteOptions(allow=self.mp_allow_ops, deny=self.mp_deny_ops, keep_fp32_scopes=self.mp_keep_fp32_scopes,
                              placement=self.mp_placement, placement_options=placement_options)


@dataclasses.dataclass(frozen=True)
class LossScaleOptions:
    """Loss scaling: ``loss_scale`` is ``dynamic``, a number, or None for the precision's default.

    The ``loss_scale_*`` knobs shape dynamic scaling; their defaults are the library's meaning of
    "dynamic" (``slim_mp.loss_scale.policy.DYNAMIC``), so the script and ``enable_mixed_precision``
    back off identically unless a flag says otherwise.
    """

    loss_scale: Optional[str] = option(
        None, "'dynamic' or a fixed number; unset means dynamic for float16 and, for bfloat16, no scaling and no "
        "skipped steps (as in float32)."
    )
    loss_scale_init: float = option(DYNAMIC.initial_scale, "Initial dynamic loss scale.")
    loss_scale_incr_every_n_steps: int = option(
        DYNAMIC.growth_steps, "Grow the dynamic loss scale after this many finite steps in a row."
    )
    loss_scale_decr_every_n_nan_or_inf: int = option(
        DYNAMIC.backoff_every, "Shrink the dynamic loss scale after this many steps with inf/NaN."
    )
    loss_scale_incr_ratio: float = option(DYNAMIC.growth_ratio, "Factor by which the dynamic loss scale grows.")
    loss_scale_decr_ratio: float = option(DYNAMIC.backoff_ratio, "Factor by which the dynamic loss scale shrinks.")

    def __post_init__(self) -> None:
        """Check ``--loss_scale`` (whatever the precision): the one place its wording lives."""
        try:
            parse_loss_scale(self.loss_scale)
        except ValueError as error:
            raise ValueError(f"--loss_scale={self.loss_scale} is neither 'dynamic' nor a number >= 1; "
                             "pass e.g. --loss_scale=dynamic or --loss_scale=128.") from error

    def dynamic(self) -> DynamicLossScale:
        """The dynamic-scaling knobs these options set."""
        return DynamicLossScale(
            initial_scale=self.loss_scale_init, growth_steps=self.loss_scale_incr_every_n_steps,
            growth_ratio=self.loss_scale_incr_ratio, backoff_every=self.loss_scale_decr_every_n_nan_or_inf,
            backoff_ratio=self.loss_scale_decr_ratio,
        )

    def manager(self, precision: str) -> LossScaleManager:
        """The manager for training in ``precision`` (creates variables for dynamic scaling).

        Raises:
          ValueError: naming the ``--loss_scale_*`` flags when a value is out of range.
        """
        try:
            return make_loss_scale_manager(self.loss_scale, precision, self.dynamic())
        except (TypeError, ValueError) as error:
            raise ValueError(f"a --loss_scale_* flag is out of range ({error})") from error


def write_rewrite_reports(reports: Sequence[RewriteReport], path: str) -> None:
    """Write the graph pass's reports to ``path`` (``--mp_report``) as JSON: ``{"reports": [...]}``."""
    content = {"reports": [report.to_dict() for report in reports]}
    write_json_atomically(path, json.loads(json.dumps(content, default=str)))  # values JSON lacks become strings
