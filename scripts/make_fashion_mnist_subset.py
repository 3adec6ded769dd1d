"""Make the bundled Fashion-MNIST subset: a seeded, class-balanced draw from the original IDX files.

    apt-get install dataset-fashion-mnist
    python scripts/make_fashion_mnist_subset.py

writes ``slim_mp/datasets/data/fashion_mnist_10k.npz`` (uint8 arrays
``train_images``, ``train_labels``, ``test_images``, ``test_labels``). The same
flags always give byte-identical arrays.
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

import os

import numpy as np
from absl import flags

from slim_mp.datasets import fashion_mnist
from slim_mp.training import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("source_dir", "/usr/share/datasets/fashion-mnist", "Folder with the original IDX files.")
flags.DEFINE_string("output", fashion_mnist.BUNDLED_PATH, "Where to write the .npz subset.")
flags.DEFINE_integer("train_per_class", 1000, "Training images kept per class.")
flags.DEFINE_integer("test_per_class", 200, "Test images kept per class.")
flags.DEFINE_integer("seed", 0, "Seed of the random draw.")


def build_subset(source_dir: str, per_class: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    """Return the arrays of the subset, keyed ``<split>_images`` / ``<split>_labels``."""
    arrays = {}
    for offset, (split_name, count) in enumerate(per_class.items()):
        images, labels = fashion_mnist.load_idx(source_dir, split_name)
        keep = fashion_mnist.balanced_subset(labels, count, seed + offset)
        arrays[f"{split_name}_images"] = images[keep]
        arrays[f"{split_name}_labels"] = labels[keep]
    return arrays


def main() -> None:
    """Draw the subset and write it to --output."""
    per_class = {"train": FLAGS.train_per_class, "test": FLAGS.test_per_class}
    arrays = build_subset(FLAGS.source_dir, per_class, FLAGS.seed)
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
    np.savez_compressed(FLAGS.output, **arrays)
    sizes = ", ".join(f"{key} {value.shape}" for key, value in arrays.items())
    print(f"wrote {FLAGS.output} ({os.path.getsize(FLAGS.output) / 1e6:.1f} MB): {sizes}")


if __name__ == "__main__":
    cli.run(main)
