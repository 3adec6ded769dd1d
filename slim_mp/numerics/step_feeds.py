"""The feeds of the numerics tools' runs: one feed dict, one per step, a function of the step, or none.

``audit`` and ``layer_diff`` run a few batches through a graph; the caller says where each batch
comes from with ``feeds``. This module is the one reader of that argument, so both tools accept
the same forms and refuse anything else with the same ``TypeError``.
"""

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence, Union

FeedDict = Mapping[Any, Any]
Feeds = Union[None, FeedDict, Sequence[FeedDict], Callable[[int], Optional[FeedDict]]]

_FORMS = ("a feed dict, a sequence of feed dicts (one per step), a function step -> feed dict, "
          "or None (an input pipeline in the graph supplies each batch)")


@dataclasses.dataclass(frozen=True)
class StepFeeds:
    """How many steps to run and the feed dict of each (None: the graph's own input pipeline)."""

    steps: int
    _feed: Callable[[int], Optional[FeedDict]]

    def feed(self, step: int) -> Optional[FeedDict]:
        """The feed dict of ``step`` (0-based)."""
        return self._feed(step)


def _require_steps(steps: Any, argument: str) -> int:
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"{argument}={steps!r} must be a positive integer; pass e.g. {argument}=5.")
    return steps


def _require_feed_dict(feed: Any, where: str) -> FeedDict:
    if not isinstance(feed, Mapping):
        raise TypeError(f"{where} must be a feed dict (tensor -> value), got {type(feed).__name__}; "
                        f"feeds takes {_FORMS}.")
    return feed


def step_feeds(feeds: Feeds, steps: Optional[int], default_steps: int, steps_argument: str = "steps") -> StepFeeds:
    """Read ``feeds`` and ``steps`` as the numerics tools take them.

    Args:
      feeds: one feed dict (every step), a sequence of feed dicts (one per step), a function
        ``step -> feed dict``, or None.
      steps: the steps to run; None for one per feed dict of a sequence, else ``default_steps``.
      default_steps: the steps when neither ``steps`` nor a sequence says.
      steps_argument: the caller's name for ``steps``, for the error messages.

    Returns:
      The steps and each step's feed dict.

    Raises:
      TypeError: if ``feeds`` is none of those forms, or a sequence holds something other than feed dicts.
      ValueError: if ``steps`` is not a positive integer, or differs from the length of a sequence of feed dicts.
    """
    if feeds is None or isinstance(feeds, Mapping):
        return StepFeeds(_require_steps(default_steps if steps is None else steps, steps_argument), lambda _: feeds)
    if callable(feeds):
        return StepFeeds(_require_steps(default_steps if steps is None else steps, steps_argument), feeds)
    if isinstance(feeds, Sequence) and not isinstance(feeds, (str, bytes)):
        batches = [_require_feed_dict(feed, f"feeds[{index}]") for index, feed in enumerate(feeds)]
        if not batches:
            raise ValueError("feeds is an empty sequence; pass one feed dict per step, or None.")
        if steps is not None and _require_steps(steps, steps_argument) != len(batches):
            raise ValueError(f"{steps_argument}={steps} but feeds holds {len(batches)} feed dicts (one per step); "
                             f"pass {steps_argument}={len(batches)} or leave it out.")
        return StepFeeds(len(batches), batches.__getitem__)
    raise TypeError(f"feeds must be {_FORMS}; got {type(feeds).__name__}.")
