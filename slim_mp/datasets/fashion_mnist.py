"""Fashion-MNIST: class names, the bundled 10k subset, and the full IDX files.

The package ships a class-balanced 10k-train / 2k-test subset
(``data/fashion_mnist_10k.npz``, made by ``scripts/make_fashion_mnist_subset.py``)
so training works without a download. Pointing ``dataset_dir`` at the
original IDX files (for example ``/usr/share/datasets/fashion-mnist``) uses
the full 60k / 10k set instead.
"""

import os

import numpy as np

from slim_mp.datasets import idx_format

CLASS_NAMES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
BUNDLED_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "fashion_mnist_10k.npz")
BUNDLED_SPLIT_SIZES = {"train": 10000, "test": 2000}
IDX_PREFIXES = {"train": "train", "test": "t10k"}


def load_bundled(split_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(images uint8 [N, 28, 28], labels uint8 [N])`` of the bundled subset's ``split_name``."""
    with np.load(BUNDLED_PATH) as arrays:
        return arrays[f"{split_name}_images"], arrays[f"{split_name}_labels"]


def load_idx(dataset_dir: str, split_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(images, labels)`` of ``split_name`` read from the original IDX files in ``dataset_dir``."""
    return idx_format.read_idx_pair(dataset_dir, IDX_PREFIXES[split_name])


def balanced_subset(labels: np.ndarray, per_class: int, seed: int) -> np.ndarray:
    """Pick ``per_class`` indices of every label at random (seeded); return them in ascending order.

    Ascending order keeps the original interleaving of classes, so the subset
    does not come grouped by class.
    """
    rng = np.random.default_rng(seed)
    chosen = []
    for label in np.unique(labels):
        candidates = np.flatnonzero(labels == label)
        if len(candidates) < per_class:
            raise ValueError(
                f"class {label} has only {len(candidates)} examples, fewer than per_class={per_class}; lower it."
            )
        chosen.append(rng.choice(candidates, size=per_class, replace=False))
    return np.sort(np.concatenate(chosen))
