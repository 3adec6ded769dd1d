"""What a serving benchmark times: its options (the flags of ``scripts/benchmark_serving.py``) and its variants.

A variant is one served model in a session of its own: float32, the model as exported in each low
precision (``slim_mp_bf16``: slim_mp's pass at export), and the float32 model with grappler's own
auto mixed precision in the session config (``grappler_bf16``, the session config the train
benchmark uses, ``benchmark_step.grappler_amp_config``). Each is compared with the float32 model
of the same format (frozen graph or SavedModel).
"""

import dataclasses
import os
from typing import List, Optional, Sequence, Tuple

from slim_mp.config_fields import ArgumentError, argument, option
from slim_mp.export.inference_graph import ExportConfig
from slim_mp.measure.benchmark.served_models import (FORMAT_ARGUMENTS, FROZEN_GRAPH, SAVED_MODEL, ServedModel,
                                                     parse_served_models)
from slim_mp.measure.benchmark.suite_results import BASELINE, Variant
from slim_mp.precision import precision_name
from slim_mp.train_dir import resolve_checkpoint
from slim_mp.training import check_model_name

# The sub-folder of the output folder that holds the models a run exported.
EXPORTS_FOLDER = "exports"
FORMATS = (FROZEN_GRAPH, SAVED_MODEL)
# The options that only shape an export: with given files they would be silently ignored, so they are refused.
EXPORT_ONLY = ("checkpoint_path", "image_size", "dataset_name", "dataset_dir", "labels_offset")


@dataclasses.dataclass(frozen=True)
class ServingOptions:
    """Options of one serving benchmark (the field names are the flags of ``scripts/benchmark_serving.py``)."""

    model_name: Optional[str] = option(
        None, "Network to export and time (nets/nets_factory.py); with --frozen_graphs/--saved_models only the name "
        "the report shows.")
    dataset_name: str = option("imagenet", "The data set whose classes the exported model predicts.")
    dataset_dir: str = option("", "Folder of the data set, read only to count classes (unset for official and "
                                  "bundled data sets).")
    labels_offset: int = option(0, "Subtracted from the data set's number of classes (1 for official ImageNet "
                                   "checkpoints without the background class).")
    image_size: Optional[int] = option(None, "Input height and width of the export; unset: the network's default.")
    checkpoint_path: Optional[str] = option(
        None, "Weights frozen into the exports; unset: freshly initialised weights (serving time does not depend "
        "on their values).")
    precisions: Tuple[str, ...] = option(
        ("bfloat16",), "Low precisions compared with float32: each exported by slim_mp's pass and applied to the "
        "float32 graph by grappler's auto mixed precision. float16 is emulated on CPUs (slow convolutions).")
    batch_sizes: Tuple[int, ...] = option((1, 8, 32), "Images per request, each batch size timed on its own.")
    rounds: int = option(50, "Timed requests per variant and batch size (interleaved rounds).")
    warmup: int = option(5, "Untimed requests per variant and batch size before timing.")
    frozen_graphs: Tuple[str, ...] = option(
        (), "Time these frozen graphs instead of exporting: precision:path items, float32 among them.")
    saved_models: Tuple[str, ...] = option(
        (), "Time these SavedModel folders instead of exporting: precision:path items, float32 among them.")
    output_dir: str = option("", "Folder for serving.json, serving.md, serving.png, TensorFlow's log and exports/.")

    @property
    def given_files(self) -> bool:
        """True when existing files are timed (``--frozen_graphs``/``--saved_models``), False when the run exports."""
        return bool(self.frozen_graphs or self.saved_models)


def _check_counts(options: ServingOptions) -> None:
    if not options.batch_sizes or any(size < 1 for size in options.batch_sizes):
        raise ArgumentError(f"{argument('batch_sizes')}={','.join(map(str, options.batch_sizes))} must list batch "
                            f"sizes of at least 1; pass e.g. {argument('batch_sizes')}=1,8,32.")
    if len(set(options.batch_sizes)) < len(options.batch_sizes):
        raise ArgumentError(f"{argument('batch_sizes')} lists a batch size twice; list each once.")
    for name, minimum in (("rounds", 1), ("warmup", 0), ("labels_offset", 0)):
        if getattr(options, name) < minimum:
            raise ArgumentError(f"{argument(name)}={getattr(options, name)} must be at least {minimum}.")
    if options.image_size is not None and options.image_size < 1:
        raise ArgumentError(f"{argument('image_size')}={options.image_size} must be a positive integer, or unset.")


def _check_given(options: ServingOptions) -> List[ServedModel]:
    """The files of ``--frozen_graphs``/``--saved_models``, checked; float32 must be among each format's."""
    defaults = {field.name: field.default for field in dataclasses.fields(ServingOptions)}
    for name in EXPORT_ONLY:
        if getattr(options, name) != defaults[name]:
            raise ArgumentError(f"{argument(name)} shapes the exports this run would make, but "
                                f"{argument('frozen_graphs')}/{argument('saved_models')} give exported files (their "
                                f"weights and input fixed); drop {argument(name)} or those.")
    models = []
    for served_format, items in ((FROZEN_GRAPH, options.frozen_graphs), (SAVED_MODEL, options.saved_models)):
        given = parse_served_models(items, served_format)
        if given and not any(model.precision == BASELINE for model in given):
            name = FORMAT_ARGUMENTS[served_format]
            raise ArgumentError(f"{argument(name)} has no float32 model, the reference of every ratio; add "
                                f"float32:<path> to {argument(name)}.")
        models.extend(given)
    return models


def check_serving_options(options: ServingOptions) -> Tuple[ServingOptions, List[ServedModel]]:
    """``options`` with canonical precision names, and the given files checked (empty when the run exports).

    Everything the user typed is checked here, before any work, so bad input writes nothing.

    Raises:
      ArgumentError: naming the argument (the script's flag) and the fix.
    """
    _check_counts(options)
    try:
        precisions = tuple(dict.fromkeys(precision_name(name) for name in options.precisions))
    except ValueError as error:
        raise ArgumentError(f"{argument('precisions')}={','.join(options.precisions)}: {error}") from None
    options = dataclasses.replace(options, precisions=precisions)
    if not options.output_dir:
        raise ArgumentError(f"{argument('output_dir')} is empty; pass a folder for the reports.")
    if options.given_files:
        return options, _check_given(options)
    if not options.model_name:
        raise ArgumentError(f"{argument('model_name')} is unset; name the network to export and time (e.g. "
                            f"{argument('model_name')}=resnet_v1_50), or pass exported files with "
                            f"{argument('frozen_graphs')}.")
    check_model_name(options.model_name)
    if options.checkpoint_path:
        resolve_checkpoint(options.checkpoint_path)
    exports = os.path.join(options.output_dir, EXPORTS_FOLDER)
    if os.path.exists(exports):
        raise ArgumentError(f"{argument('output_dir')}={options.output_dir} holds {EXPORTS_FOLDER}/ of an earlier run; "
                            f"pass a new folder, or time those files with {argument('frozen_graphs')}.")
    return options, []


def export_config(options: ServingOptions, checkpoint: Optional[str]) -> ExportConfig:
    """The export of ``options``' network with ``checkpoint`` frozen in, its batch left open as servers take it."""
    return ExportConfig(model_name=options.model_name, image_size=options.image_size, dataset_name=options.dataset_name,
                        dataset_dir=options.dataset_dir, labels_offset=options.labels_offset,
                        checkpoint_path=checkpoint)


@dataclasses.dataclass(frozen=True)
class ServingVariant:
    """One timed configuration: a served model, with grappler's AMP in ``amp`` in its session config or not."""

    model: ServedModel
    amp: Optional[str] = None

    @property
    def label(self) -> str:
        """``float32``, ``slim_mp_bf16`` (exported in bfloat16) or ``grappler_bf16`` (the train benchmark's names)."""
        if self.amp:
            return Variant("grappler", self.amp).label
        if self.model.precision == BASELINE:
            return BASELINE
        return Variant("slim_mp", self.model.precision).label

    @property
    def key(self) -> str:
        """The label, and the format unless a frozen graph: unique within a run."""
        return self.label if self.model.format == FROZEN_GRAPH else f"{self.label}_saved_model"

    @property
    def precision(self) -> str:
        """The precision it computes in: AMP's, or the one exported."""
        return self.amp or self.model.precision


def plan_serving_variants(models: Sequence[ServedModel], amp_precisions: Sequence[str]) -> List[ServingVariant]:
    """Per format (frozen graph first), float32 then the low-precision exports; then grappler's AMP in each of
    ``amp_precisions`` on the float32 model of the first format."""
    ordered = sorted(models, key=lambda model: (FORMATS.index(model.format), model.precision != BASELINE))
    variants = [ServingVariant(model) for model in ordered]
    base = next(model for model in ordered if model.precision == BASELINE)
    return variants + [ServingVariant(base, precision) for precision in amp_precisions]


def reference_of(variant: ServingVariant, variants: Sequence[ServingVariant]) -> ServingVariant:
    """The float32 variant ``variant`` is compared with: the float32 model of its format, without AMP."""
    return next(other for other in variants if other.amp is None and other.model.precision == BASELINE
                and other.model.format == variant.model.format)
