"""Command-line precision options (``--precision``, ``--loss_scale*``, ``--mp_*``) turned into slim_mp arguments."""

import dataclasses
import json
import math
from typing import Any, Dict, Optional, Sequence, Tuple

from slim_mp.loss_scale.managers import ExponentialUpdateLossScaleManager, LossScaleManager
from slim_mp.mixed_precision import (
    DYNAMIC_GROWTH_STEPS,
    DYNAMIC_INITIAL_SCALE,
    make_loss_scale_manager,
)
from slim_mp.graph_pass.report import RewriteReport

PRECISIONS = ("float32", "float16", "bfloat16")


@dataclasses.dataclass(frozen=True)
class PrecisionOptions:
    """Which precision to compute in, and how the graph pass treats op types and scopes."""

    precision: str = "float32"
    mp_allow_ops: Tuple[str, ...] = ()
    mp_deny_ops: Tuple[str, ...] = ()
    mp_keep_fp32_scopes: Tuple[str, ...] = ()
    mp_report: Optional[str] = None

    @property
    def mixed(self) -> bool:
        """True when the graph is to be rewritten (float16 or bfloat16)."""
        return check_precision(self.precision) != "float32"

    def rewrite_options(self) -> Dict[str, Any]:
        """Keyword arguments for ``slim_mp.rewrite`` / ``enable_mixed_precision``."""
        return {
            "allow": list(self.mp_allow_ops),
            "deny": list(self.mp_deny_ops),
            "keep_fp32_scopes": list(self.mp_keep_fp32_scopes),
        }


@dataclasses.dataclass(frozen=True)
class LossScaleOptions:
    """Loss scaling: ``loss_scale`` is ``dynamic``, a number, or None for the precision's default.

    The ``loss_scale_*`` knobs shape dynamic scaling (contrib's ExponentialUpdateLossScaleManager).
    """

    loss_scale: Optional[str] = None
    loss_scale_init: float = DYNAMIC_INITIAL_SCALE
    loss_scale_incr_every_n_steps: int = DYNAMIC_GROWTH_STEPS
    loss_scale_decr_every_n_nan_or_inf: int = 2
    loss_scale_incr_ratio: float = 2.0
    loss_scale_decr_ratio: float = 0.8


def check_precision(precision: str) -> str:
    """Return ``precision`` if it is float32, float16 or bfloat16; raise ValueError naming the flag otherwise."""
    if precision not in PRECISIONS:
        raise ValueError(f"--precision={precision!r} is not supported; use one of {', '.join(PRECISIONS)}.")
    return precision


def _parse_fixed_scale(text: str) -> float:
    """Return the number in ``text`` (a fixed loss scale >= 1), or raise ValueError naming ``--loss_scale``."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"--loss_scale={text!r} is neither 'dynamic' nor a number >= 1; pass e.g. dynamic or 128.")
    return value


def make_manager(options: LossScaleOptions, precision: str) -> LossScaleManager:
    """Build the loss-scale manager the options ask for; creates variables for dynamic scaling.

    Unset ``loss_scale`` means dynamic for float16 and none (a fixed 1) for bfloat16.
    """
    wanted = options.loss_scale or ("dynamic" if precision == "float16" else None)
    if wanted == "dynamic":
        try:
            return ExponentialUpdateLossScaleManager(
                options.loss_scale_init,
                options.loss_scale_incr_every_n_steps,
                decr_every_n_nan_or_inf=options.loss_scale_decr_every_n_nan_or_inf,
                incr_ratio=options.loss_scale_incr_ratio,
                decr_ratio=options.loss_scale_decr_ratio,
            )
        except (TypeError, ValueError) as error:
            raise ValueError(f"a --loss_scale_* flag is out of range ({error})") from error
    return make_loss_scale_manager(None if wanted is None else _parse_fixed_scale(wanted), precision)


def write_reports(reports: Sequence[RewriteReport], path: str) -> None:
    """Write the graph pass's reports to ``path`` (``--mp_report``) as JSON: ``{"reports": [...]}``."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"reports": [report.to_dict() for report in reports]}, handle, indent=1, default=str)
