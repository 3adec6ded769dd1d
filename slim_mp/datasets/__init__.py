"""Data sets for slim_mp training: TF-Slim's official TFRecord sets, converted image folders, bundled Fashion-MNIST."""

from slim_mp.datasets.dataset_factory import DATASET_NAMES, DatasetSpec, get_dataset
from slim_mp.datasets.image_folder import ConversionSummary, convert_image_folder
from slim_mp.datasets.official import OFFICIAL_DATASETS

__all__ = ["DATASET_NAMES", "DatasetSpec", "ConversionSummary", "convert_image_folder", "get_dataset",
           "OFFICIAL_DATASETS"]
