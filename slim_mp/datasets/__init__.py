"""Data sets for slim_mp training: TF-Slim's official TFRecord sets, converted image folders, bundled Fashion-MNIST.

In the order the data flows: ``image_folder`` converts a folder of class sub-folders into TFRecord
shards (``tfrecord_format`` the example keys, ``labels_file`` the ``labels.txt`` file) and writes
``image_folder_metadata`` last; ``official`` holds the official sets' sizes and file names;
``idx_format`` and ``fashion_mnist`` read the bundled or full Fashion-MNIST, ``fashion_mnist_full`` the full
one from its Debian package, or says how to install it; ``tfrecord_reader`` reads shards back as
``(image, label)`` and names a damaged, removed or unreadable file (``InputDataError``); ``label_checks`` stops a label
outside the classes; ``dataset_factory`` (``get_dataset``) is the one entry point over all of them.
"""

from slim_mp.datasets.dataset_factory import DATASET_NAMES, DatasetSpec, get_dataset
from slim_mp.datasets.image_folder import ConversionSummary, convert_image_folder
from slim_mp.datasets.official import OFFICIAL_DATASETS
from slim_mp.datasets.tfrecord_reader import InputDataError

__all__ = ["DATASET_NAMES", "DatasetSpec", "ConversionSummary", "convert_image_folder", "get_dataset",
           "InputDataError", "OFFICIAL_DATASETS"]
