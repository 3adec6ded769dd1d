"""Build the README's overflowing checkpoint: a float32 resnet_v1_18 whose conv1 no longer fits float16.

Trains resnet_v1_18 in float32 on the bundled Fashion-MNIST at 32 px (the flags of the README's
"When mixed precision misbehaves" example, ``--seed=0``) into ``--train_dir``, then writes
``--output_dir/model.ckpt``: the same weights with conv1's weights and its batch-norm moving mean
multiplied by 10^4 and its moving variance by 10^8. Batch norm undoes the scale, so float32 trains
and evaluates as before, but conv1's output grows past float16's largest value (65504).

    python scripts/make_overflow_checkpoint.py --steps 500 --train_dir runs/r18_float32 --output_dir runs/r18_big

A ``--train_dir`` that already holds the run resumes it (nothing to do once it reached ``--steps``).
Bad input prints one ``error: ...`` line and exits with status 2.
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

import dataclasses
import os

from slim_mp.config_fields import option
from slim_mp.training import cli
from slim_mp.training.learning_rate import LearningRateSettings
from slim_mp.training.loop import train
from slim_mp.training.optimizers import OptimizerSettings
from slim_mp.train_dir import write_scaled_checkpoint
from slim_mp.training.train_config import TrainConfig

WEIGHT_FACTOR = 1e4
CONV1_FACTORS = {
    "resnet_v1_18/conv1/weights": WEIGHT_FACTOR,
    "resnet_v1_18/conv1/BatchNorm/moving_mean": WEIGHT_FACTOR,
    "resnet_v1_18/conv1/BatchNorm/moving_variance": WEIGHT_FACTOR ** 2,
}


@dataclasses.dataclass(frozen=True)
class OverflowExampleConfig:
    """Where the float32 run and its scaled copy go, and how long the run trains."""

    steps: int = option(500, "Training steps of the float32 run.")
    train_dir: str = option("runs/r18_float32", "Folder of the float32 run (resumed if it exists).")
    output_dir: str = option("runs/r18_big", "Folder to create for the scaled checkpoint (must not exist).")


def float32_run(config: OverflowExampleConfig) -> TrainConfig:
    """The README example's training flags, in float32, for ``config.steps`` steps."""
    return TrainConfig(
        train_dir=config.train_dir, dataset_name="fashion_mnist", model_name="resnet_v1_18",
        preprocessing_name="cifarnet", train_image_size=32, batch_size=32, seed=0, weight_decay=0.0,
        max_number_of_steps=config.steps, log_every_n_steps=100,
        optimizer_settings=OptimizerSettings(optimizer="momentum"),
        learning_rate_settings=LearningRateSettings(learning_rate=0.01),
    )


cli.define_flags(OverflowExampleConfig)


def main() -> None:
    """Train (or finish) the float32 run, then write its scaled copy."""
    config = cli.config_from_flags(OverflowExampleConfig)
    if config.steps < 1:
        raise ValueError(f"--steps={config.steps} must be a positive integer; pass e.g. --steps=500.")
    if os.path.exists(config.output_dir):
        raise ValueError(f"--output_dir={config.output_dir} already exists; remove it or pass another folder.")
    train(float32_run(config))
    written = write_scaled_checkpoint(config.train_dir, config.output_dir, CONV1_FACTORS)
    scaled = ", ".join(f"{name} x{factor:g}" for name, factor in CONV1_FACTORS.items())
    print(f"wrote {written}: {scaled}")


if __name__ == "__main__":
    cli.run(main)
