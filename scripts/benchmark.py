"""Benchmark train steps of several networks: float32, slim_mp, grappler's AMP and the all-low-precision floor.

    python scripts/benchmark.py --models resnet_v1_50,mobilenet_v1 --batch_size 32 --output_dir bench

Per model and configuration: median step time, images/s, speed-up over float32 (configurations timed
interleaved in one process), peak memory (each configuration in its own subprocess), casts executed
and in the graph, and the slim_mp pass time (cold: an empty timing cache; warm: the same build
again). By default only the low precisions the device runs
natively are measured; name emulated ones with --precisions to measure them too. Writes
DIR/benchmark.json, DIR/benchmark.md and DIR/benchmark.png (speed-ups vs float32). Only the
benchmark's own lines reach the screen; TensorFlow's and absl's go to DIR/tensorflow.log.

--background_load=N runs all of that beside N busy-loop processes (one per core, pinned; always
stopped at the end), the measured placement deciding under that load (pinned in
DIR/placements/); then, the load stopped, float32 and each decided placement are re-timed side by
side, and the reports show per model "decided under load" and "quiet re-timing".

--cluster=loopback puts the variables on a parameter server instead (one parameter_server.py
process; this process is the worker): float32 and slim_mp per precision, each in one process and on
the cluster, all timed interleaved; the reports give the step times, the speed-up each layout keeps,
the bytes across the wire per step per worker (a traced step), the fused kernels, and how many
workers one parameter server's link carries at 1, 10 and 100 Gbit/s. --cluster=shaped
--link_gbits=G runs the parameter server behind a link of G Gbit/s each way (a network namespace and
a veth pair shaped with tc: needs root; where refused, one line says so and the run uses loopback):

    python scripts/benchmark.py --models resnet_v1_50,mobilenet_v1 --batch_size 8 --image_size 224 \
        --cluster=shaped --link_gbits=1 --output_dir bench_1gbit
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

import os
import tempfile

from absl import flags

from slim_mp.devices import detect_device, precision_support
from slim_mp.distribute.local_cluster import python_command
from slim_mp.measure.benchmark import cluster_suite, suite, suite_results, under_load
from slim_mp.measure.benchmark.benchmark_report import BenchmarkReport
from slim_mp.measure.benchmark.cluster_report import ClusterReport
from slim_mp.seams import sigterm_as_interrupt
from slim_mp.training import cli, prepare_output_dir
from slim_mp.training.library_logs import send_library_logs_to

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODELS = ["resnet_v1_50", "inception_v3", "mobilenet_v1", "vgg_16", "resnet_v1_18"]

flags.DEFINE_list("models", DEFAULT_MODELS, "Comma-separated network names of nets/nets_factory.py.")
flags.DEFINE_list("precisions", [], "bfloat16 and/or float16; unset means those the device runs natively.")
flags.DEFINE_integer("batch_size", 32, "Images per train step.")
flags.DEFINE_integer("image_size", None, "Input height and width; unset means each network's default.")
flags.DEFINE_integer("rounds", 10, "Timed steps per configuration (interleaved rounds).")
flags.DEFINE_integer("warmup", 3, "Untimed steps per configuration before timing.")
flags.DEFINE_integer("memory_steps", 3, "Steps each peak-memory subprocess runs.")
flags.DEFINE_float("memory_budget_mb", None, "Also search, per model, the largest batch whose peak above baseline "
                   "fits in this many MiB, in float32 and in slim_mp (doubling, then bisection). Unset: no search.")
flags.DEFINE_integer("background_load", 0, "Busy-loop processes (one per core) to run while benchmarking; "
                     "the placement is decided under them, then re-timed quietly. 0: none.")
flags.DEFINE_string("cluster", "none", "Where the variables live: none (this process: the full benchmark), "
                    "loopback (a parameter-server process on loopback; this process is the worker) or shaped (the "
                    "parameter server behind a link of --link_gbits, in a network namespace: needs root).")
flags.DEFINE_float("link_gbits", None, "With --cluster=shaped: the link's bandwidth each way, in Gbit/s.")
flags.DEFINE_string("output_dir", None, "Folder for benchmark.json, benchmark.md and benchmark.png.")
flags.mark_flag_as_required("output_dir")
FLAGS = flags.FLAGS


def progress(line: str) -> None:
    """Print one progress line at once (runs take minutes)."""
    print(line, flush=True)


def main() -> None:
    """Check the flags, benchmark every model and write the three reports."""
    settings = suite_results.Settings(FLAGS.batch_size, FLAGS.image_size, FLAGS.rounds, FLAGS.warmup,
                                      FLAGS.memory_steps, FLAGS.memory_budget_mb)
    background_load = under_load.check_background_load(FLAGS.background_load)
    cluster = cluster_suite.check_cluster_options(FLAGS.cluster, FLAGS.link_gbits, background_load,
                                                  FLAGS.memory_budget_mb)
    models = suite.check_models([name for name in FLAGS.models if name])
    device = detect_device()
    precisions = suite.choose_precisions([name for name in FLAGS.precisions if name], device)
    prepare_output_dir(FLAGS.output_dir, "--output_dir")  # only once every flag is checked: bad input writes nothing
    log_path = os.path.join(FLAGS.output_dir, "tensorflow.log")
    send_library_logs_to(log_path)
    progress(f"device: {device.describe()} (TensorFlow's log: {log_path})")
    for support in precision_support(device).values():
        progress(support.describe())
    progress(f"benchmarking: float32 and {', '.join(precisions)}")
    if cluster:
        ps_command = python_command(os.path.join(SCRIPTS, "parameter_server.py"))
        with sigterm_as_interrupt(), tempfile.TemporaryDirectory(prefix="slim_mp_placement_cache_") as cache_dir:
            cluster_run = cluster_suite.run_cluster_suite(models, precisions, settings, device, cluster, ps_command,
                                                          progress, cache_dir)
        for path in ClusterReport(cluster_run).write_reports(FLAGS.output_dir).values():
            progress(f"wrote {path}")
        return
    run = suite.run_suite(models, precisions, settings, device, progress, background_load,
                                    os.path.join(FLAGS.output_dir, "placements"))
    for line in under_load.summary_lines(run.quiet_retimings):
        progress(line)
    for path in BenchmarkReport(run).write_reports(FLAGS.output_dir).values():
        progress(f"wrote {path}")


if __name__ == "__main__":
    cli.run(main)
