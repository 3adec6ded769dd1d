"""What training and evaluation both set up: the network, its preprocessing, the input size, output folders."""

import os
import tempfile
from typing import Callable, Optional, Tuple

from nets import nets_factory
from nets.preprocessing import cifarnet_preprocessing, preprocessing_factory
from slim_mp.config_fields import ArgumentError, argument


def check_model_name(model_name: str) -> None:
    """Raise ValueError naming ``--model_name`` (with the closest names) unless the factory knows the network."""
    nets_factory.check_network_name(model_name, "--model_name")


def check_batch_norm_decay(model_name: str, batch_norm_decay: float) -> None:
    """Raise ValueError naming ``--batch_norm_decay`` unless it lies in (0, 1) and the network has batch norm."""
    if not 0 < batch_norm_decay < 1:
        raise ValueError(f"--batch_norm_decay={batch_norm_decay} must lie between 0 and 1; pass e.g. 0.99, or leave "
                         "it unset for the network's own.")
    if nets_factory.batch_norm_decay(model_name) is None:
        raise ValueError(f"--batch_norm_decay={batch_norm_decay}: network {model_name} has no batch norm; leave "
                         "--batch_norm_decay unset for it.")


def network_and_preprocessing(
    model_name: str,
    preprocessing_name: Optional[str],
    num_classes: int,
    weight_decay: float,
    is_training: bool,
    use_grayscale: bool,
    batch_norm_decay: Optional[float] = None,
) -> Tuple[Callable, Callable]:
    """Return ``(network_fn, preprocessing_fn)``; the preprocessing defaults to the network's own.

    ``batch_norm_decay`` (training's ``--batch_norm_decay``) replaces the network's own; None keeps it.
    """
    check_model_name(model_name)
    if num_classes < 1:
        raise ValueError(f"the dataset leaves {num_classes} classes after --labels_offset; lower --labels_offset.")
    if batch_norm_decay is not None:
        check_batch_norm_decay(model_name, batch_norm_decay)
    network_fn = nets_factory.get_network_fn(
        model_name, num_classes=num_classes, weight_decay=weight_decay, is_training=is_training,
        batch_norm_decay=batch_norm_decay,
    )
    name = preprocessing_name or model_name
    if name not in preprocessing_factory.PREPROCESSING_MODULES:
        raise ValueError(
            f"--preprocessing_name={name!r} is not a known preprocessing; use one of "
            f"{', '.join(preprocessing_factory.preprocessing_names())}."
        )
    return network_fn, preprocessing_factory.get_preprocessing(name, is_training, use_grayscale)


def check_training_crop(preprocessing_name: str, image_size: int, image_shape: Tuple[Optional[int], ...],
                        argument_name: str) -> None:
    """Raise ``ArgumentError`` naming the argument ``argument_name`` (the image size's) when CifarNet's training
    preprocessing cannot crop ``image_size`` from
    the data set's images: it pads ``PADDING`` pixels a side and random-crops, never resizes (TensorFlow
    would stop at the first batch with an assertion deep in the input pipeline)."""
    if preprocessing_factory.PREPROCESSING_MODULES.get(preprocessing_name) is not cifarnet_preprocessing:
        return
    height, width = image_shape[:2]
    if height is None or width is None:
        return
    largest = min(height, width) + 2 * cifarnet_preprocessing.PADDING
    if image_size > largest:
        named = argument(argument_name)
        raise ArgumentError(
            f"{named}={image_size} is larger than the {preprocessing_name} preprocessing can crop from this data "
            f"set's {height}x{width} images (padded by {cifarnet_preprocessing.PADDING} a side: at most {largest}); "
            f"pass {named}={largest} or less, or a preprocessing that resizes (e.g. "
            f"{argument('preprocessing_name')}=inception)."
        )


def input_size(requested: Optional[int], network_fn: Callable, argument_name: str) -> int:
    """Return ``requested`` (the argument ``argument_name``) or, when unset, the network's default input size."""
    size = requested or network_fn.default_image_size
    if not size:
        raise ArgumentError(f"network {network_fn.__name__} has no default input size; set {argument(argument_name)}.")
    return size


def prepare_output_dir(path: str, argument_name: str) -> None:
    """Create ``path`` if needed and check that files can be written there; ``ArgumentError`` naming the argument
    ``argument_name`` otherwise."""
    if not path:
        raise ArgumentError(f"{argument(argument_name)} is empty; pass a folder to write to.")
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ArgumentError(f"{argument(argument_name)}={path} is not a writable folder ({reason}); pass one you can "
                            "write to.") from error
