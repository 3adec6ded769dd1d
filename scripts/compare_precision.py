"""fp32-vs-low layer diff: one batch through a network in float32 and after the graph pass, per end point.

    python scripts/compare_precision.py --model_name=resnet_v1_18 --dataset_name=fashion_mnist \
        --preprocessing_name=cifarnet --train_image_size=32 --batch_size=8 --precision=bfloat16 \
        --output_dir=runs/layer_diff

Same weights (``--checkpoint_path`` or a fresh ``--seed``-ed initialisation), same batch, inference
mode; prints the table and writes ``layer_diff.json``, ``layer_diff.md`` and ``layer_diff.png``.
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

from absl import flags as absl_flags

from slim_mp.measure.numerics_report import LAYER_DIFF_FILES, run_layer_diff
from slim_mp.numerics import layer_diff_markdown
from slim_mp.training import TrainConfig, cli

cli.define_flags(
    TrainConfig, help_overrides={"precision": "Compare float32 with: bfloat16 (default), float16, float32 itself."}
)
absl_flags.FLAGS.set_default("precision", "bfloat16")
absl_flags.DEFINE_string("output_dir", "runs/layer_diff", "Folder for layer_diff.json, .md and .png.")


def main() -> None:
    """Diff the network the flags describe and print the table."""
    config = cli.config_from_flags(TrainConfig)
    diff = run_layer_diff(config, cli.FLAGS.output_dir, config.precision_options.precision)
    print(layer_diff_markdown(diff, f"{config.model_name}: {diff.precision} vs float32"))
    print("wrote " + ", ".join(f"{cli.FLAGS.output_dir}/{name}" for name in LAYER_DIFF_FILES))


if __name__ == "__main__":
    cli.run(main)
