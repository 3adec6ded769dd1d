"""Evaluate a TF-Slim checkpoint on a dataset split: top-1, top-5 and mean loss (writes eval_dir/metrics.json).

    python scripts/eval_image_classifier.py --checkpoint_path=runs/lenet --eval_dir=runs/lenet/eval \
        --dataset_name=fashion_mnist --model_name=lenet --precision=bfloat16

A ``--checkpoint_path`` ending in ``.tflite`` is a TensorFlow Lite model (``export_inference_graph.py``),
run by LiteRT on the same batches (``--quantize``: it must be int8). Every example of the split is
counted exactly once (the last partial batch included).
The flags are those of TF-Slim's original ``eval_image_classifier.py`` plus ``--precision``.
Bad input prints one ``error: ...`` line and exits with status 2 (``--verbose`` adds the traceback).
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

from slim_mp.training import EvalConfig, cli, evaluate

cli.define_flags(EvalConfig)


def main() -> None:
    """Evaluate with the options given on the command line."""
    evaluate(cli.config_from_flags(EvalConfig))


if __name__ == "__main__":
    cli.run(main)
