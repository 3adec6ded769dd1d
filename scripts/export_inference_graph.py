"""Export a network's inference graph, optionally with frozen weights, in float32 or low precision.

    python scripts/export_inference_graph.py --model_name=lenet --dataset_name=fashion_mnist \
        --checkpoint_path=runs/lenet --precision=bfloat16 --output_file=runs/lenet/frozen_bf16.pb \
        --saved_model_dir=runs/lenet/saved_model_bf16

The flags of TF-Slim's official ``export_inference_graph.py`` keep their names and defaults
(``--quantize`` is refused); ``--checkpoint_path`` freezes the weights into the graph,
``--precision`` rewrites it for float16 / bfloat16 inference (weights stored in that type; input
and outputs stay float32) and ``--saved_model_dir`` also writes a SavedModel for serving.
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
