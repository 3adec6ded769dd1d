"""Evaluate a TF-Slim checkpoint on a dataset split: top-1, top-5 and mean loss (writes eval_dir/metrics.json).

    python scripts/eval_image_classifier.py --checkpoint_path=runs/lenet --eval_dir=runs/lenet/eval \
        --dataset_name=fashion_mnist --model_name=lenet --precision=bfloat16

Every example of the split is counted exactly once (the last partial batch included).
The flags are those of TF-Slim's original ``eval_image_classifier.py`` plus ``--precision``.
"""

from slim_mp.training import cli as flags
from slim_mp.training.evaluation import EvalConfig, evaluate

flags.define_flags(
    EvalConfig,
    help_overrides={
        "checkpoint_path": "Checkpoint file, or folder whose latest checkpoint is evaluated.",
        "batch_size": "The number of images in each evaluation batch.",
    },
)


def main() -> None:
    """Evaluate with the options given on the command line."""
    evaluate(flags.config_from_flags(EvalConfig))


if __name__ == "__main__":
    flags.run(main)
