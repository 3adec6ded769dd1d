"""A checkpoint as TensorFlow Lite models beside its frozen float32 graph: bytes, top-1 and agreement, as a table.

    python scripts/tflite_report.py --checkpoint_path=runs/lenet --model_name=lenet \
        --dataset_name=fashion_mnist --output_dir=runs/lenet/tflite

Exports the frozen float32 graph and float32, float16 and int8 .tflite models into ``--output_dir``
(the export flags keep their meaning: ``--image_size``, ``--preprocessing_name``, ``--calibration_samples``),
runs them on ``--dataset_split_name`` (TensorFlow for the graph, LiteRT for the models) and prints the
Markdown table of docs/operations.md "From training to serving".
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

from slim_mp.export.tflite_comparison import ComparisonConfig, compare_tflite, comparison_table
from slim_mp.training import cli

cli.define_flags(ComparisonConfig)


def main() -> None:
    """Compare with the options given on the command line and print the table."""
    config = cli.config_from_flags(ComparisonConfig)
    print(comparison_table(compare_tflite(config), config.calibration_samples))


if __name__ == "__main__":
    cli.run(main)
