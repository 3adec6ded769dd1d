"""Export a network's inference graph, optionally with frozen weights, in float32 or low precision.

    python scripts/export_inference_graph.py --model_name=lenet --dataset_name=fashion_mnist \
        --checkpoint_path=runs/lenet --precision=bfloat16 --output_file=runs/lenet/frozen_bf16.pb \
        --saved_model_dir=runs/lenet/saved_model_bf16

    python scripts/export_inference_graph.py --model_name=lenet --dataset_name=fashion_mnist \
        --checkpoint_path=runs/lenet --quantize --output_file=runs/lenet/lenet_int8.tflite

The flags of TF-Slim's official ``export_inference_graph.py`` keep their names and defaults;
``--checkpoint_path`` freezes the weights into the graph, ``--precision`` rewrites it for float16 /
bfloat16 inference (weights stored in that type; input and outputs stay float32) and
``--saved_model_dir`` also writes a SavedModel for serving. An ``--output_file`` ending in ``.tflite``
is a TensorFlow Lite model by TensorFlow's converter: float32, float16 weights (``--precision=float16``)
or int8 (``--quantize``, calibrated on ``--calibration_samples`` train images).
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

from slim_mp.export.exporter import export_model
from slim_mp.export.inference_graph import ExportConfig
from slim_mp.training import cli

cli.define_flags(ExportConfig)


def main() -> None:
    """Export with the options given on the command line."""
    export_model(cli.config_from_flags(ExportConfig))


if __name__ == "__main__":
    cli.run(main)
