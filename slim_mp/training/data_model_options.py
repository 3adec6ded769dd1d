"""The data, network and precision options that training and evaluation share.

``TrainConfig`` and ``EvalConfig`` inherit them, so each flag has one name, default and help text
for both scripts, and the configs stay flat (``config.model_name``), as the original flags are.
"""

import dataclasses
from typing import Optional

from slim_mp.config_fields import option
from slim_mp.training.precision_flags import PrecisionOptions


@dataclasses.dataclass(frozen=True)
class DataModelOptions:
    """Where the data comes from, which network reads it, and in which precision."""

    master: str = option(
        "", "The address of the TensorFlow master (a running worker server, e.g. grpc://host:2222); '' is local."
    )
    num_preprocessing_threads: int = option(
        4, "The number of images decoded and preprocessed in parallel (training with --seed preprocesses one at a "
        "time, so its random distortions repeat)."
    )
    dataset_name: str = option(
        "imagenet", "The name of the dataset to load (e.g. imagenet, cifar10, flowers, fashion_mnist, image_folder)."
    )
    dataset_dir: Optional[str] = option(
        None, "The folder of the dataset files (unset for the bundled fashion_mnist subset)."
    )
    labels_offset: int = option(
        0, "An offset subtracted from the labels (e.g. 1 for ImageNet checkpoints without background)."
    )
    model_name: str = option("inception_v3", "The name of the network (see nets/nets_factory.py).")
    preprocessing_name: Optional[str] = option(None, "The preprocessing to use; unset means the one of --model_name.")
    moving_average_decay: Optional[float] = option(
        None, "The decay of the moving average of the model variables; unset for none."
    )
    use_grayscale: bool = option(False, "Feed the network single-channel (grayscale) images.")
    precision_options: PrecisionOptions = dataclasses.field(default_factory=PrecisionOptions)
