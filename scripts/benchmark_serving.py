"""Benchmark a network as a server runs it: float32, its low-precision exports and grappler's AMP, per batch size.

    python scripts/benchmark_serving.py --model_name=resnet_v1_50 --batch_sizes=1,8,32 --output_dir=runs/serving

Exports the network (``export_inference_graph.py``'s own function) in float32 and each of
--precisions, as a frozen graph and a SavedModel, into DIR/exports/, freezing --checkpoint_path
or, without it, freshly initialised weights (serving time does not depend on their values); or
times existing exports: --frozen_graphs=float32:fp32.pb,bfloat16:bf16.pb (and/or --saved_models).
Each variant runs in its own session, the float32 graph also with grappler's auto mixed precision
in the session config; all are timed interleaved per batch size, each request a batch of random
images fed from host memory, the probabilities fetched. Writes DIR/serving.json, DIR/serving.md
(file sizes; latency p50/p99, images/s and the speed-up over float32 with its noise) and
DIR/serving.png (images/s and latency by batch size); TensorFlow's lines go to DIR/tensorflow.log.
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

import os

from slim_mp.devices import detect_device
from slim_mp.measure.benchmark.serving import run_serving_benchmark
from slim_mp.measure.benchmark.serving_options import ServingOptions, check_serving_options
from slim_mp.measure.benchmark.serving_report import ServingReport
from slim_mp.training import cli, prepare_output_dir
from slim_mp.training.library_logs import send_library_logs_to

cli.define_flags(ServingOptions)


def progress(line: str) -> None:
    """Print one progress line at once (exports and timings take minutes)."""
    print(line, flush=True)


def main() -> None:
    """Check the flags and files, export (unless given files), time every variant and write the three reports."""
    options, given = check_serving_options(cli.config_from_flags(ServingOptions))
    prepare_output_dir(options.output_dir, "--output_dir")  # only once everything is checked: bad input writes nothing
    log_path = os.path.join(options.output_dir, "tensorflow.log")
    send_library_logs_to(log_path)
    progress(f"device: {detect_device().describe()} (TensorFlow's log: {log_path})")
    run = run_serving_benchmark(options, given, progress)
    for path in ServingReport(run).write_reports(options.output_dir).values():
        progress(f"wrote {path}")


if __name__ == "__main__":
    cli.run(main)
