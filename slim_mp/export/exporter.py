"""``export_model``: what ``export_inference_graph.py`` does, as a function."""

import dataclasses
import os
from typing import Callable, Optional

from absl import logging

from slim_mp.export.inference_graph import (
    ExportConfig, build_inference_graph, check_export_config, check_writable_file, freeze_graph, write_graph_def,
)
from slim_mp.export.saved_model import check_new_folder, write_saved_model
from slim_mp.export.tflite_model import (
    INT8, calibration_images, check_tflite_config, convert_to_tflite, stored_as, tflite_precision, write_tflite_model,
)
from slim_mp.train_dir import resolve_checkpoint
from slim_mp.training import (
    PrecisionOptions, StepSettings, is_tflite_path, live_graph_def, out_of_memory_named, write_rewrite_reports,
)

_SERVED = "input 'input', outputs 'logits', 'probabilities', 'classes'"


@dataclasses.dataclass(frozen=True)
class ExportResult:
    """What was written: the graph file and its size, the SavedModel folder, the checkpoint frozen in."""

    output_file: Optional[str]
    output_bytes: Optional[int]
    saved_model_dir: Optional[str]
    checkpoint: Optional[str]


def export_model(config: ExportConfig, print_line: Callable[[str], None] = print) -> ExportResult:
    """Export the inference graph ``config`` describes; freeze ``--checkpoint_path`` into it when given.

    An ``--output_file`` ending in ``.tflite`` is a TensorFlow Lite model (``export_tflite``).

    Raises:
      ValueError: naming the flag for an unknown model, a checkpoint of another model, an
        unwritable output, an option the output cannot honour, or the ops TensorFlow Lite lacks.
    """
    check_export_config(config)
    export = export_tflite if is_tflite_path(config.output_file) else _export
    with out_of_memory_named(StepSettings(config.model_name, config.batch_size, config.precision_options.precision,
                                          config.image_size, "image_size")):
        return export(config, print_line)


def _export(config: ExportConfig, print_line: Callable[[str], None]) -> ExportResult:
    """``export_model`` once the config is checked."""
    checkpoint = resolve_checkpoint(config.checkpoint_path) if config.checkpoint_path else None
    if config.output_file:
        check_writable_file(config.output_file, "output_file")
    if config.saved_model_dir:
        check_new_folder(config.saved_model_dir, "saved_model_dir")
    built = build_inference_graph(config)
    if built.report is not None:
        logging.info("%s", built.report.summary_text())
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
        print_line(f"wrote {config.output_file}: {output_bytes} bytes, {config.precision_options.precision}, "
                   f"{frozen}; {_SERVED}")
    if config.saved_model_dir:
        write_saved_model(graph_def, config.saved_model_dir)
        print_line(f"wrote SavedModel {config.saved_model_dir} (signature serving_default: images -> "
                   "logits, probabilities, classes)")
    return ExportResult(config.output_file or None, output_bytes, config.saved_model_dir, checkpoint)


def export_tflite(config: ExportConfig, print_line: Callable[[str], None] = print) -> ExportResult:
    """Freeze ``--checkpoint_path`` into the float32 inference graph and write it as a TensorFlow Lite model.

    float32, float16 weights (``--precision=float16``) or int8 (``--quantize``), by TensorFlow's
    converter (``tflite_model``); the line printed compares the model's bytes with the frozen float32 graph's.
    """
    check_tflite_config(config)
    checkpoint = resolve_checkpoint(config.checkpoint_path)
    check_writable_file(config.output_file, "output_file")
    built = build_inference_graph(dataclasses.replace(config, precision_options=PrecisionOptions()))  # float32
    graph_def = freeze_graph(built, checkpoint, config.model_name)
    calibration = calibration_images(config, built) if tflite_precision(config) == INT8 else None
    model = convert_to_tflite(graph_def, config, calibration)
    write_tflite_model(model, config.output_file)
    frozen_bytes = graph_def.ByteSize()
    print_line(f"wrote {config.output_file}: {len(model)} bytes ({len(model) / frozen_bytes:.2f}x the frozen float32 "
               f"graph's {frozen_bytes}), TensorFlow Lite {stored_as(config, model)}, weights of {checkpoint}; "
               f"{_SERVED} (classes int64)")
    return ExportResult(config.output_file, len(model), None, checkpoint)
