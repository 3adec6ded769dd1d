"""Library glue of ``audit_precision.py`` and ``compare_precision.py``: build a zoo network from ``TrainConfig``
flags, audit it or diff it layer by layer, and write JSON, Markdown and a PNG.

The network, its preprocessing, the input batches and the fine-tuning restore are the training
script's own (``slim_mp.training``), so the audit sees what ``train_image_classifier.py`` would train.
"""

import dataclasses
import os
from typing import Callable, Dict

import tensorflow as tf

from slim_mp.json_files import write_json_atomically
from slim_mp.numerics import AuditResult, LayerDiff, audit, audit_markdown, layer_diff, layer_diff_markdown
from slim_mp.precision import resolve_precision
from slim_mp.training import (TrainConfig, add_classification_losses, dataset_and_network, fine_tune_init_fn,
                              out_of_memory_named, parse_scopes, prepare_output_dir, train_step_settings,
                              training_input_iterator)

tf1 = tf.compat.v1

AUDIT_FILES = ("audit.json", "audit.md", "audit.png")
LAYER_DIFF_FILES = ("layer_diff.json", "layer_diff.md", "layer_diff.png")


@dataclasses.dataclass
class NetworkGraph:
    """A float32 network on the training input: its batch, end points, total loss, and a session initialiser."""

    graph: tf.Graph
    images: tf.Tensor
    end_points: Dict[str, tf.Tensor]
    loss: tf.Tensor
    initialise: Callable[[tf1.Session], None]


def _distinct_tensors(end_points: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """The end points in network order, each tensor once (nets list some under two names)."""
    seen, distinct = set(), {}
    for name, tensor in end_points.items():
        if tensor.ref() not in seen:
            seen.add(tensor.ref())
            distinct[name] = tensor
    return distinct


def build_network_graph(config: TrainConfig, is_training: bool) -> NetworkGraph:
    """Build ``config``'s network in float32 on its training batches, with its losses (nothing runs yet).

    Weights come from ``--checkpoint_path`` (with ``--checkpoint_exclude_scopes``) or a fresh
    initialisation (``--seed`` makes it repeatable).
    """
    graph = tf.Graph()
    with graph.as_default():
        if config.seed is not None:
            tf1.set_random_seed(config.seed)
        dataset, num_classes, network_fn, preprocess = dataset_and_network(config, is_training)
        iterator, input_feed = training_input_iterator(config, dataset, preprocess, network_fn, "/device:CPU:0")
        images, labels = iterator.get_next()
        logits, end_points = network_fn(images)
        end_points = _distinct_tensors(end_points)
        add_classification_losses(logits, end_points, labels, num_classes, config.label_smoothing)
        loss = tf1.losses.get_total_loss()
        restore = fine_tune_init_fn(config.checkpoint_path, parse_scopes(config.checkpoint_exclude_scopes),
                                    config.ignore_missing_vars)
        initialisers = [tf1.global_variables_initializer(), tf1.local_variables_initializer()]

    def initialise(session: tf1.Session) -> None:
        session.run(initialisers)
        if input_feed is not None:
            input_feed.initialize(session)
        if restore is not None:
            restore(session)

    return NetworkGraph(graph, images, end_points, loss, initialise)


def _write_text(text: str, path: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


@dataclasses.dataclass(frozen=True)
class AuditReport:
    """One value audit under a title, with the report verbs every tool of ``slim_mp.measure`` shares."""

    result: AuditResult
    title: str

    def to_dict(self) -> dict:
        """``audit.json``: the audit's numbers and its recommendation."""
        return self.result.to_dict()

    def to_markdown(self) -> str:
        """``audit.md``: the audit's tables."""
        return audit_markdown(self.result)

    def write_reports(self, output_dir: str) -> Dict[str, str]:
        """Write audit.json, audit.md and audit.png into ``output_dir``; their paths by kind."""
        from slim_mp.measure.numerics_plot import plot_audit  # matplotlib: the plots extra

        paths = dict(zip(("json", "md", "png"), (os.path.join(output_dir, name) for name in AUDIT_FILES)))
        write_json_atomically(paths["json"], self.to_dict())
        _write_text(self.to_markdown(), paths["md"])
        plot_audit(self.result, paths["png"], title=self.title)
        return paths


@dataclasses.dataclass(frozen=True)
class LayerDiffReport:
    """One layer-by-layer diff of ``model_name`` under a title, with the report verbs of ``slim_mp.measure``."""

    diff: LayerDiff
    title: str
    model_name: str

    def to_dict(self) -> dict:
        """``layer_diff.json``: every end point's errors, and the model's name."""
        return dict(self.diff.to_dict(), model_name=self.model_name)

    def to_markdown(self) -> str:
        """``layer_diff.md``: one table row per end point."""
        return layer_diff_markdown(self.diff, self.title)

    def write_reports(self, output_dir: str) -> Dict[str, str]:
        """Write layer_diff.json, .md and .png into ``output_dir``; their paths by kind."""
        from slim_mp.measure.numerics_plot import plot_layer_diff

        paths = dict(zip(("json", "md", "png"), (os.path.join(output_dir, name) for name in LAYER_DIFF_FILES)))
        write_json_atomically(paths["json"], self.to_dict())
        _write_text(self.to_markdown(), paths["md"])
        plot_layer_diff(self.diff, paths["png"], self.title)
        return paths


def run_audit(config: TrainConfig, steps: int, output_dir: str, precision: str) -> AuditResult:
    """Audit ``steps`` batches of ``config``'s float32 network for ``precision``; write audit.json/.md/.png."""
    try:
        dtype = resolve_precision(precision)
    except ValueError as error:
        raise ValueError(f"--precision={precision}: {error}") from error
    if steps < 1:
        raise ValueError(f"--steps={steps} must be a positive integer; pass e.g. --steps=5.")
    prepare_output_dir(output_dir, "output_dir")
    with out_of_memory_named(train_step_settings(config)):
        built = build_network_graph(config, is_training=True)
        with built.graph.as_default(), tf1.Session(graph=built.graph) as session:
            built.initialise(session)
            result = audit(built.loss, dtype, session, steps=steps,
                           options=config.precision_options.rewrite_options())
    AuditReport(result, f"{config.model_name}: float32 values against {dtype.name}").write_reports(output_dir)
    return result


def run_layer_diff(config: TrainConfig, output_dir: str, precision: str) -> LayerDiff:
    """Diff ``config``'s network (inference mode) in float32 and ``precision`` on one batch; write layer_diff.*."""
    name = resolve_precision(precision, allow_float32=True).name
    prepare_output_dir(output_dir, "output_dir")
    with out_of_memory_named(train_step_settings(config)):
        built = build_network_graph(config, is_training=False)
        with built.graph.as_default(), tf1.Session(graph=built.graph) as session:
            built.initialise(session)
            batch = session.run(built.images)
            diff = layer_diff(built.end_points, name, session, {built.images: batch},
                              options=config.precision_options.rewrite_options())
    title = f"{config.model_name}: relative error of each end point, {name} vs float32 (batch {len(batch)})"
    LayerDiffReport(diff, title, config.model_name).write_reports(output_dir)
    return diff
