"""``RewriteOptions``: every option of the graph pass in one checked value, passed whole between callers.

The public entry points (``slim_mp.rewrite``, ``enable_mixed_precision``, ``audit``, ``layer_diff``)
take the options as keywords, as contrib-style code and the README call them, and turn them into a
``RewriteOptions`` once, at that boundary, with ``rewrite_options_from``; every hop behind it (the
optimizer wrapper, the training app, the numerics tools) hands the same value on.
"""

import dataclasses
import difflib
from typing import Any, Dict, Mapping, Optional, Tuple

from slim_mp.devices import DEVICE_KINDS
from slim_mp.graph_pass.op_classes import check_class_overrides
from slim_mp.graph_pass.placement import PlacementOptions, resolve_placement

_OP_TYPE_LISTS = ("allow", "infer", "clear", "deny", "remove")


@dataclasses.dataclass(frozen=True)
class RewriteOptions:
    """How the pass treats op types, scopes, update ops and devices; checked when built.

    Attributes:
      allow: op types to move into the allow list (always low precision).
      infer: op types to move into the infer list (low precision when their inputs are).
      clear: op types to move into the clear list (follow their neighbours).
      deny: op types to move into the deny list (always float32).
      remove: op types to take out of every list (unlisted, so float32).
      keep_fp32_scopes: name scopes whose ops all stay float32 (e.g. the logits layer).
      device_type: ``CPU`` or ``GPU``, where unplaced ops run; None takes the measuring target's
        device, else detects this machine's.
      include_update_ops: also rewrite what the graph's ``UPDATE_OPS`` compute; False for update ops
        outside the loss (e.g. an auxiliary head, or an inference graph).
      placement: ``"measured"`` times the allow ops where the step runs and keeps float32 those for
        which low precision does not pay; ``"static"`` runs every allow op low, as the tables say;
        None is the default (``measured`` unless ``$SLIM_MP_PLACEMENT`` says otherwise).
      placement_options: the measured placement's cache, decisions file, measuring target and
        tuning (``PlacementOptions``); None for the defaults.

    Raises (when built):
      TypeError: for an op-type or scope list given as one string or holding a non-string, a
        non-bool ``include_update_ops``, or ``placement_options`` that is not a ``PlacementOptions``.
      ValueError: for an unknown TensorFlow op type, an op type in two lists (or added and removed),
        an unknown ``device_type`` or ``placement``.
    """

    allow: Tuple[str, ...] = ()
    infer: Tuple[str, ...] = ()
    clear: Tuple[str, ...] = ()
    deny: Tuple[str, ...] = ()
    remove: Tuple[str, ...] = ()
    keep_fp32_scopes: Tuple[str, ...] = ()
    device_type: Optional[str] = None
    include_update_ops: bool = True
    placement: Optional[str] = None
    placement_options: Optional[PlacementOptions] = None

    def __post_init__(self) -> None:
        for name in (*_OP_TYPE_LISTS, "keep_fp32_scopes"):
            object.__setattr__(self, name, _string_tuple(name, getattr(self, name)))
        check_class_overrides(self.class_overrides(), self.remove)
        if self.device_type is not None and self.device_type not in DEVICE_KINDS:
            raise ValueError(f"device_type={self.device_type!r} is not supported; use 'CPU' or 'GPU'.")
        if not isinstance(self.include_update_ops, bool):
            raise TypeError(f"include_update_ops={self.include_update_ops!r} must be True or False.")
        if self.placement is not None:
            resolve_placement(self.placement)
        if self.placement_options is not None and not isinstance(self.placement_options, PlacementOptions):
            raise TypeError(f"placement_options must be a slim_mp.graph_pass.PlacementOptions, got "
                            f"{type(self.placement_options).__name__}.")

    def class_overrides(self) -> Dict[str, Tuple[str, ...]]:
        """The op types moved into each class: ``{"allow": ..., "infer": ..., "clear": ..., "deny": ...}``."""
        return {"allow": self.allow, "infer": self.infer, "clear": self.clear, "deny": self.deny}


OPTION_NAMES = tuple(field.name for field in dataclasses.fields(RewriteOptions))


def _string_tuple(name: str, value: Any) -> Tuple[str, ...]:
    """``value`` (a list, tuple or other iterable of strings) as a tuple; TypeError naming ``name`` otherwise."""
    if isinstance(value, str):
        raise TypeError(f"{name}={value!r} is one string; pass a list, e.g. {name}=[{value!r}].")
    try:
        items = tuple(value)
    except TypeError:
        raise TypeError(f"{name}={value!r} must be a list of strings.") from None
    wrong = [item for item in items if not isinstance(item, str)]
    if wrong:
        raise TypeError(f"{name} holds {wrong[0]!r}, which is not a string; pass names, e.g. {name}=['Softmax'].")
    return items


def rewrite_options_from(options: Optional[RewriteOptions], keywords: Mapping[str, Any],
                         caller: str) -> RewriteOptions:
    """The options a public entry point was called with: ``options`` (or the defaults) with ``keywords`` applied.

    Args:
      options: a ``RewriteOptions`` to start from, or None for the defaults.
      keywords: option names and values given as keywords; they replace those of ``options``.
      caller: the entry point's name, for the error message (e.g. ``"rewrite"``).

    Returns:
      The checked ``RewriteOptions``.

    Raises:
      TypeError: for a keyword that is no option (naming it and the closest option), or ``options``
        that is not a ``RewriteOptions``; and whatever ``RewriteOptions`` raises for a bad value.
    """
    unknown = sorted(set(keywords) - set(OPTION_NAMES))
    if unknown:
        close = difflib.get_close_matches(unknown[0], OPTION_NAMES, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise TypeError(f"{caller}() got an unknown option {unknown[0]!r}.{hint} The rewrite options are: "
                        f"{', '.join(OPTION_NAMES)}.")
    if options is not None and not isinstance(options, RewriteOptions):
        raise TypeError(f"{caller}(options=...) must be a slim_mp.RewriteOptions, got {type(options).__name__}.")
    base = options if options is not None else RewriteOptions()
    return dataclasses.replace(base, **keywords) if keywords else base
