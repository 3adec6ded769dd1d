"""The full Fashion-MNIST (60k train, 10k test images) from the Debian package ``dataset-fashion-mnist``.

``dataset_name='fashion_mnist_full'`` needs no ``dataset_dir``: it reads the package's four IDX
files from ``DEBIAN_DIR``. A ``dataset_dir`` (with either Fashion-MNIST name) reads the same four
files from that folder instead. When a file is missing, one error names it, the argument or the
package, and what to do, so asking for the full test set never silently falls back to the bundled 2k
subset.
"""

import os
from typing import Optional

import numpy as np

from slim_mp.config_fields import ArgumentError, argument
from slim_mp.datasets import fashion_mnist

DATASET_NAME = "fashion_mnist_full"
DEBIAN_PACKAGE = "dataset-fashion-mnist"
DEBIAN_DIR = "/usr/share/datasets/fashion-mnist"
IDX_KINDS = ("images-idx3", "labels-idx1")


def _first_missing_file(directory: str, split_name: str) -> Optional[str]:
    """The first IDX file of ``split_name`` found in ``directory`` neither gzipped nor plain, else None."""
    for kind in IDX_KINDS:
        base = os.path.join(directory, f"{fashion_mnist.IDX_PREFIXES[split_name]}-{kind}-ubyte")
        if not (os.path.exists(base + ".gz") or os.path.exists(base)):
            return base + ".gz"
    return None


def _missing_message(missing: str, dataset_dir: Optional[str]) -> str:
    install = f"apt-get install {DEBIAN_PACKAGE}"
    folder, name = argument("dataset_dir"), argument("dataset_name")
    if dataset_dir:
        return (f"{folder}={dataset_dir} holds no {os.path.basename(missing)} (nor the file unzipped); point "
                f"{folder} at the folder of the four Fashion-MNIST IDX files (`{install}` puts them in "
                f"{DEBIAN_DIR}).")
    return (f"{name}={DATASET_NAME} reads the Debian package {DEBIAN_PACKAGE}, which is not installed "
            f"({missing} is missing); install it (`{install}`), or set {folder} to a folder of the four "
            f"Fashion-MNIST IDX files, or use {name}=fashion_mnist for the bundled 10k/2k subset.")


def load_full(split_name: str, dataset_dir: Optional[str]) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(images uint8 [N, 28, 28], labels uint8 [N])`` of ``split_name`` from the original IDX files.

    They are read from ``dataset_dir``, or from the Debian package's folder when it is None;
    a missing file raises ``ArgumentError`` naming ``dataset_dir``, or the package and how to install it.
    """
    directory = dataset_dir or DEBIAN_DIR
    missing = _first_missing_file(directory, split_name)
    if missing:
        raise ArgumentError(_missing_message(missing, dataset_dir))
    return fashion_mnist.load_idx(directory, split_name)
