"""Compare train-step speed and cast counts: float32, slim_mp, grappler's AMP and the all-low floor.

    python scripts/benchmark_rewrite.py --model_name resnet_v1_50 --precision bfloat16 --batch_size 8

All four configurations run in one process, timed interleaved; the table gives median step times and, per
pair, the median of the round-by-round ratios. The floor builds the same network entirely in low precision
(float32-storage custom getter), with the same cross-entropy loss, as the fastest a graph pass could hope for.
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

import statistics

from absl import flags

from slim_mp import devices
from slim_mp.json_files import write_json_atomically
from slim_mp.measure.benchmark import benchmark_step
from slim_mp.precision import resolve_precision
from slim_mp.timing import paired_ratio
from slim_mp.training import cli

flags.DEFINE_string("model_name", "resnet_v1_50", "Network name of nets_factory.")
flags.DEFINE_string("precision", "bfloat16", "float16 or bfloat16.")
flags.DEFINE_integer("batch_size", 8, "Images per step.")
flags.DEFINE_integer("image_size", None, "Input size; default: the network's default_image_size.")
flags.DEFINE_integer("rounds", 10, "Timed steps per configuration.")
flags.DEFINE_integer("warmup", 3, "Untimed steps per configuration before timing.")
flags.DEFINE_list("configs", list(benchmark_step.CONFIGS), "Configurations to compare.")
flags.DEFINE_string("output_json", None, "Also write the results as JSON here.")
FLAGS = flags.FLAGS


def main() -> None:
    """Build every configuration, time them interleaved and print (and optionally write) the table."""
    precision = resolve_precision(FLAGS.precision)
    device = devices.device_type()
    print(f"model={FLAGS.model_name} precision={precision.name} batch={FLAGS.batch_size} device={device} "
          f"cpu_features={devices.cpu_features()}", flush=True)
    steps = {}
    for config in FLAGS.configs:
        steps[config] = benchmark_step.build_benchmark_step(
            config, FLAGS.model_name, precision, FLAGS.batch_size, FLAGS.image_size)
        print(f"built {config}", flush=True)
    casts = {name: benchmark_step.executed_kernels(step).get("Cast", 0) for name, step in steps.items()}
    times = benchmark_step.interleaved_times(
        {name: (lambda s=step: s.session.run(s.train_op)) for name, step in steps.items()},
        FLAGS.rounds, FLAGS.warmup, progress=lambda line: print(line, flush=True))
    rows = []
    print("\nratios: median over rounds of the per-round ratio (each pair ran seconds apart)")
    print(f"{'config':<10} {'median s/step':>14} {'vs float32':>11} {'vs grappler':>12} {'vs floor':>9} "
          f"{'casts run':>10} {'casts built':>12}")
    for name, values in times.items():
        ratios = {base: paired_ratio(times[name], times[base]) if base in times else None
                  for base in ("float32", "grappler", "floor")}
        row = {"config": name, "median_seconds": statistics.median(values),
               **{f"vs_{base}": ratio for base, ratio in ratios.items()},
               "casts_executed": casts[name], "casts_in_graph": steps[name].graph_casts}
        rows.append(row)
        shown = [f"{r:.3f}x" if r is not None else "-" for r in ratios.values()]
        print(f"{name:<10} {row['median_seconds']:>14.4f} {shown[0]:>11} {shown[1]:>12} {shown[2]:>9} "
              f"{casts[name]:>10} {steps[name].graph_casts:>12}")
    if "slim_mp" in steps:
        print(f"\nslim_mp pass time: {steps['slim_mp'].pass_seconds:.2f} s")
    if FLAGS.output_json:
        write_json_atomically(FLAGS.output_json, {
            "model": FLAGS.model_name, "precision": precision.name, "batch_size": FLAGS.batch_size,
            "device": device, "rows": rows,
            "pass_seconds": steps["slim_mp"].pass_seconds if "slim_mp" in steps else None,
        })


if __name__ == "__main__":
    cli.run(main)
