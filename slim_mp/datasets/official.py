"""Metadata of the data sets of the official TF-Slim ``dataset_factory``, and where their converters put the files.

Sizes, class counts and file names are those of the official converters
(``download_and_convert_*`` and ``build_imagenet_data`` /
``build_visualwakewords_data``), so directories they wrote read as they are.
"""

import dataclasses
from typing import Mapping

from slim_mp.datasets.tfrecord_format import ImageShape


@dataclasses.dataclass(frozen=True)
class OfficialDataset:
    """What the official reader knows about one data set.

    ``file_pattern`` is a glob relative to ``dataset_dir`` with ``{split}`` in
    it; ``default_names`` label the classes when ``labels.txt`` is absent
    (empty where the official reader has no built-in names).
    """

    split_sizes: Mapping[str, int]
    num_classes: int
    file_pattern: str
    image_shape: ImageShape
    default_names: tuple[str, ...] = ()


OFFICIAL_DATASETS: Mapping[str, OfficialDataset] = {
    "cifar10": OfficialDataset(
        split_sizes={"train": 50000, "test": 10000},
        num_classes=10,
        file_pattern="cifar10_{split}.tfrecord",
        image_shape=(32, 32, 3),
        default_names=(
            "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
        ),
    ),
    "flowers": OfficialDataset(
        split_sizes={"train": 3320, "validation": 350},
        num_classes=5,
        file_pattern="flowers_{split}_*.tfrecord",
        image_shape=(None, None, 3),
        default_names=("daisy", "dandelion", "roses", "sunflowers", "tulips"),
    ),
    "mnist": OfficialDataset(
        split_sizes={"train": 60000, "test": 10000},
        num_classes=10,
        file_pattern="mnist_{split}.tfrecord",
        image_shape=(28, 28, 1),
        default_names=("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
    ),
    "imagenet": OfficialDataset(
        split_sizes={"train": 1281167, "validation": 50000},
        num_classes=1001,
        file_pattern="{split}-*",
        image_shape=(None, None, 3),
    ),
    "visualwakewords": OfficialDataset(
        split_sizes={"train": 82783, "val": 40504},
        num_classes=2,
        file_pattern="{split}.record-*",
        image_shape=(None, None, 3),
        default_names=("background", "person"),
    ),
}
