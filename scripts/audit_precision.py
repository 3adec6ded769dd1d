"""Value-range audit: what float16/bfloat16 would face, measured on a few float32 training batches.

    python scripts/audit_precision.py --model_name=resnet_v1_18 --dataset_name=fashion_mnist \
        --preprocessing_name=cifarnet --train_image_size=32 --batch_size=32 --precision=float16 \
        --steps=5 --output_dir=runs/audit

Takes the model, dataset and checkpoint flags of ``train_image_classifier.py`` plus ``--steps`` and
``--output_dir``; writes ``audit.json``, ``audit.md`` and ``audit.png`` there and prints the
recommendation (``--mp_keep_fp32_scopes``, ``--loss_scale``) to train with.
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

import time

from absl import flags as absl_flags

from slim_mp.measure.numerics_report import AUDIT_FILES, run_audit
from slim_mp.training import TrainConfig, cli

cli.define_flags(
    TrainConfig, help_overrides={"precision": "The low precision whose range is checked: float16 (default), bfloat16."}
)
absl_flags.DEFINE_integer("steps", 5, "Float32 batches to measure.")
absl_flags.FLAGS.set_default("precision", "float16")
absl_flags.DEFINE_string("output_dir", "runs/audit", "Folder for audit.json, audit.md and audit.png.")


def main() -> None:
    """Audit the network the flags describe and print the recommendation."""
    config = cli.config_from_flags(TrainConfig)
    started = time.perf_counter()
    result = run_audit(config, cli.FLAGS.steps, cli.FLAGS.output_dir, config.precision_options.precision)
    recommendation = result.recommendation
    print(f"audited {len(result.ops_of('activation'))} ops over {result.steps} batches in "
          f"{time.perf_counter() - started:.1f}s")
    print(f"keep float32: {','.join(recommendation.keep_fp32_scopes) or '(nothing overflows)'}")
    if recommendation.loss_scale_range is not None:
        lo, hi = recommendation.loss_scale_range
        initial = recommendation.initial_loss_scale
        print(f"loss scale: {'none needed' if initial is None else f'{initial:g}'} (range [{lo:g}, {hi:g}])")
    print("wrote " + ", ".join(f"{cli.FLAGS.output_dir}/{name}" for name in AUDIT_FILES))


if __name__ == "__main__":
    cli.run(main)
