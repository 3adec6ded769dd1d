"""Convert a folder of per-class image sub-folders into TF-Slim TFRecords for ``--dataset_name=image_folder``.

    python scripts/convert_image_folder.py --input_dir photos/ --output_dir photos_tfrecord/ \
        [--validation_fraction 0.2 --seed 0 --num_shards N]

``photos/`` holds one sub-folder per class with JPEG/PNG files. Prints the
classes, images per split and skipped files; on bad input prints one error
line and exits with status 2 (``--verbose`` adds the traceback).
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

from absl import flags

from slim_mp.datasets import ConversionSummary, convert_image_folder
from slim_mp.training import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("input_dir", None, "Folder with one sub-folder of JPEG/PNG images per class.")
flags.DEFINE_string("output_dir", None, "New (or empty) folder for the TFRecord shards, labels.txt and metadata.")
flags.DEFINE_float("validation_fraction", 0.2, "Fraction of each class put in the validation split, in [0, 1).")
flags.DEFINE_integer("seed", 0, "Seed of the train/validation split and of the shuffling.")
flags.DEFINE_integer("num_shards", None, "Shards per split (default: one per 1024 images).")
flags.mark_flags_as_required(["input_dir", "output_dir"])


def format_summary(summary: ConversionSummary) -> str:
    """Return the human-readable report of a conversion."""
    lines = [
        f"wrote {summary.output_dir}",
        f"classes: {len(summary.class_names)} ({', '.join(summary.class_names)})",
        *(f"{split}: {size} images" for split, size in summary.split_sizes.items()),
        f"skipped: {len(summary.skipped)} files",
        *(f"  {path}: {reason}" for path, reason in summary.skipped),
    ]
    return "\n".join(lines)


def main() -> None:
    """Convert --input_dir into --output_dir and print the summary."""
    try:
        summary = convert_image_folder(
            FLAGS.input_dir, FLAGS.output_dir, FLAGS.validation_fraction, FLAGS.seed, FLAGS.num_shards
        )
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        raise ValueError(
            f"cannot convert --input_dir={FLAGS.input_dir} into --output_dir={FLAGS.output_dir}: "
            f"{error.strerror or type(error).__name__}{where}; check that both folders are readable and writable."
        ) from error
    print(format_summary(summary))


if __name__ == "__main__":
    cli.run(main)
