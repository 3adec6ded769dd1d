"""Comma-separated scope lists (``--trainable_scopes``, ``--checkpoint_exclude_scopes``).

Membership is ``slim_mp.graph_pass.in_scopes``, the rule the pass's keep-float32 scopes use too.
"""

from typing import Optional, Tuple


def parse_scopes(text: Optional[str]) -> Tuple[str, ...]:
    """Split ``"a/b, c"`` into ``("a/b", "c")``; None or blank gives ``()``."""
    return tuple(scope.strip().rstrip("/") for scope in (text or "").split(",") if scope.strip())
