"""``export_model``: what ``export_inference_graph.py`` does, as a function."""

import dataclasses
import os
from typing import Callable, Optional

from absl import logging

from slim_mp.export.inference_graph import (
    ExportConfig, build_inference_graph, check_export_config, check_writable_file, freeze_graph, write_graph_def,
)
from slim_mp.export.saved_model import check_new_folder, write_saved_model
from slim_mp.train_dir import resolve_checkpoint
from slim_mp.training import StepSettings, live_graph_def, out_of_memory_named, write_rewrite_reports


@dataclasses.dataclass(frozen=True)
class ExportResult:
    """What was written: the graph file and its size, the SavedModel folder, the checkpoint frozen in."""

    output_file: Optional[str]
    output_bytes: Optional[int]
    saved_model_dir: Optional[str]
    checkpoint: Optional[str]


def export_model(config: ExportConfig, print_line: Callable[[str], None] = print) -> ExportResult:
    """Export the inference graph ``config`` describes; freeze ``--checkpoint_path`` into it when given.

    Raises:
      ValueError: naming the flag for an unknown model, a checkpoint of another model, an
        unwritable output or an unsupported option (``--quantize``).
    """
    check_export_config(config)
    with out_of_memory_named(StepSettings(config.model_name, config.batch_size, config.precision_options.precision,
                                          config.image_size, "image_size")):
        return _export(config, print_line)


def _export(config: ExportConfig, print_line: Callable[[str], None]) -> ExportResult:
    """``export_model`` once the config is checked."""
    checkpoint = resolve_checkpoint(config.checkpoint_path) if config.checkpoint_path else None
    if config.output_file:
        check_writable_file(config.output_file, "output_file")
    if config.saved_model_dir:
        check_new_folder(config.saved_model_dir, "saved_model_dir")
    built = build_inference_graph(config)
    if built.report is not None:
        logging.info("%s", built.report.summary())
        if config.precision_options.mp_report:
            write_rewrite_reports([built.report], config.precision_options.mp_report)
    if checkpoint:
        graph_def = freeze_graph(built, checkpoint, config.model_name)
    else:  # the official script's graph, with variables; a rewritten one without the pass's dead originals
        graph_def = live_graph_def(built.graph, [built.report] if built.report else [])
    output_bytes = None
    if config.output_file:
        write_graph_def(graph_def, config.output_file, as_text=config.write_text_graphdef)
        output_bytes = os.path.getsize(config.output_file)
        frozen = f"weights of {checkpoint}" if checkpoint else "no weights (variables)"
        print_line(f"wrote {config.output_file}: {output_bytes} bytes, {config.precision_options.precision}, {frozen}; "
                   "input 'input', outputs 'logits', 'probabilities', 'classes'")
    if config.saved_model_dir:
        write_saved_model(graph_def, config.saved_model_dir)
        print_line(f"wrote SavedModel {config.saved_model_dir} (signature serving_default: images -> "
                   "logits, probabilities, classes)")
    return ExportResult(config.output_file or None, output_bytes, config.saved_model_dir, checkpoint)
