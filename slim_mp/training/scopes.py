"""Comma-separated scope lists (``--trainable_scopes``, ``--checkpoint_exclude_scopes``) and membership tests."""

from typing import Optional, Sequence, Tuple


def parse_scopes(text: Optional[str]) -> Tuple[str, ...]:
    """Split ``"a/b, c"`` into ``("a/b", "c")``; None or blank gives ``()``."""
    return tuple(scope.strip().rstrip("/") for scope in (text or "").split(",") if scope.strip())


def in_scopes(name: str, scopes: Sequence[str]) -> bool:
    """True when ``name`` is one of ``scopes`` or lies under one of them (whole path components only)."""
    return any(name == scope or name.startswith(scope + "/") for scope in scopes)
