"""fp32-vs-low layer diff: the same weights and batch through the float32 graph and the rewritten one, per end point.

The end points are evaluated in float32, then the graph computing them is rewritten in place by
``slim_mp.rewrite`` and evaluated again with the same feeds (one batch, or several: the errors are
then over all of them), so the relative error per end point (in network order) shows where
precision is lost.
"""

import dataclasses
import math
import os
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from slim_mp.graph_pass import RewriteOptions, RewriteReport, rewrite, rewrite_options_from
from slim_mp.markdown_table import markdown_table
from slim_mp.numerics.step_feeds import Feeds, StepFeeds, step_feeds
from slim_mp.precision import PrecisionLike, resolve_precision


@dataclasses.dataclass(frozen=True)
class LayerError:
    """How far one end point moved: ``||low - fp32|| / ||fp32||`` (L2 over the batch), the largest |difference|."""

    name: str
    shape: Tuple[int, ...]
    relative_error: float
    max_abs_error: float
    nonfinite: int


@dataclasses.dataclass(frozen=True)
class LayerDiff:
    """Per-end-point errors in network order, and the rewrite's report (None for float32 against itself)."""

    precision: str
    layers: List[LayerError]
    report: Optional[RewriteReport]

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready: the precision and one entry per end point."""
        return {"precision": self.precision, "layers": [dataclasses.asdict(layer) for layer in self.layers]}


def _compare(name: str, reference: np.ndarray, low: np.ndarray) -> LayerError:
    """The error of ``low`` against ``reference`` (float64); any inf/NaN in ``low`` makes it infinite."""
    reference = np.asarray(reference, np.float64)
    low = np.asarray(low, np.float64)
    finite = np.isfinite(low)
    difference = np.where(finite, low - reference, 0.0)
    scale = float(np.linalg.norm(reference))
    error = float(np.linalg.norm(difference))
    relative = error / scale if scale > 0 else (0.0 if error == 0 else math.inf)
    if not finite.all():
        relative = math.inf
    return LayerError(name, tuple(reference.shape), relative,
                      float(np.abs(difference).max()) if difference.size else 0.0, int((~finite).sum()))


def _run_batches(session: tf.compat.v1.Session, chosen: Mapping[str, tf.Tensor],
                 batches: StepFeeds) -> Dict[str, List[np.ndarray]]:
    """Each chosen tensor's value for every batch, in step order."""
    runs = [session.run(dict(chosen), feed_dict=batches.feed(step)) for step in range(batches.steps)]
    return {name: [run[name] for run in runs] for name in chosen}


def _compare_batches(name: str, reference: Sequence[np.ndarray], low: Sequence[np.ndarray]) -> LayerError:
    """The error over every batch at once; the shape is one batch's."""
    joined = _compare(name, np.concatenate([np.ravel(value) for value in reference]),
                      np.concatenate([np.ravel(value) for value in low]))
    return dataclasses.replace(joined, shape=tuple(np.shape(reference[0])))


def layer_diff(end_points: Mapping[str, tf.Tensor], precision: PrecisionLike, session: tf.compat.v1.Session,
               feeds: Feeds = None, *, steps: Optional[int] = None, options: Optional[RewriteOptions] = None,
               **option_keywords: Any) -> LayerDiff:
    """Evaluate ``end_points`` in float32, rewrite their graph to ``precision`` in place, evaluate them again.

    Run it on a float32 inference graph whose variables are initialised in ``session`` (not
    finalized: the rewrite adds ops). The rewritten graph runs in a new session of the same target
    holding the same weights (a session ignores changes to ops it has run). ``feeds`` must pin each
    batch (e.g. feed the images tensor) so both runs see the same ones. ``float32`` skips the rewrite
    and re-runs the same graph: the errors are then those of the runs' own non-determinism (zero on
    a CPU).

    Args:
      end_points: name -> tensor, in network order (the ``end_points`` dict of a TF-Slim network).
      precision: ``float16``, ``bfloat16`` or ``float32``.
      session: a session of the graph, variables initialised.
      feeds: the feed dict of both runs, a sequence of feed dicts (one batch each), or a function
        ``step -> feed dict``; the errors are over all the batches.
      steps: batches to run; None for one per feed dict of a sequence, else 1.
      options: the graph pass's ``RewriteOptions``; None for the defaults.
      **option_keywords: options of ``slim_mp.rewrite`` (``keep_fp32_scopes``, ...), replacing those of ``options``.

    Returns:
      One ``LayerError`` per floating-point end point, in the order given.

    Raises:
      ValueError: for an unknown precision, a bad rewrite option, no floating-point end point, or
        ``steps`` other than a positive integer or the length of a sequence of feed dicts.
      TypeError: for a keyword that is no rewrite option, or ``feeds`` that is no feed dict, sequence
        of them, function or None.
    """
    dtype = resolve_precision(precision, allow_float32=True)
    options = rewrite_options_from(options, option_keywords, "layer_diff")
    batches = step_feeds(feeds, steps, default_steps=1)
    chosen = {name: t for name, t in end_points.items() if isinstance(t, tf.Tensor) and t.dtype.is_floating}
    if not chosen:
        raise ValueError("end_points holds no floating-point tensor; pass the network's end_points dict.")
    reference = _run_batches(session, chosen, batches)
    if dtype == tf.float32:
        low = _run_batches(session, chosen, batches)
        return LayerDiff(dtype.name, [_compare_batches(name, reference[name], low[name]) for name in chosen], None)
    graph = session.graph
    with graph.as_default(), tempfile.TemporaryDirectory() as folder:
        saver = tf.compat.v1.train.Saver(tf.compat.v1.global_variables())
        weights = saver.save(session, os.path.join(folder, "weights"), write_meta_graph=False)
        report = rewrite(list(chosen.values()), dtype, options=options)
        chosen = report.remap(chosen)
        # A session keeps the ops it already ran as they were: the rewritten graph needs a new one.
        with tf.compat.v1.Session(graph=graph, target=session.sess_str) as rewritten:
            saver.restore(rewritten, weights)
            low = _run_batches(rewritten, chosen, batches)
    return LayerDiff(dtype.name, [_compare_batches(name, reference[name], low[name]) for name in chosen], report)


def layer_diff_markdown(diff: LayerDiff, title: str) -> str:
    """A table: end point, shape, relative error, largest absolute error, non-finite count."""
    rows = [(layer.name, "x".join(map(str, layer.shape)), f"{layer.relative_error:.3g}", f"{layer.max_abs_error:.3g}",
             str(layer.nonfinite)) for layer in diff.layers]
    header = ("end point", "shape", "relative error", "max abs error", "non-finite")
    return "\n".join([f"# {title}", "", *markdown_table(header, rows)]) + "\n"
