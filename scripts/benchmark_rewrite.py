"""Compare train-step speed and cast counts: float32, slim_mp, grappler's AMP and the all-low floor.

    python scripts/benchmark_rewrite.py --model_name resnet_v1_50 --precision bfloat16 --batch_size 8

All four configurations run in one process, timed interleaved; the table gives median step
times and ratios. The floor builds the same network entirely in low precision (float32-storage
custom getter), with the same cross-entropy loss, as the fastest a graph pass could hope for.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from slim_mp import benchmarking  # noqa: E402
from slim_mp.precision import resolve_precision  # noqa: E402

flags.DEFINE_string("model_name", "resnet_v1_50", "Network name of nets_factory.")
flags.DEFINE_string("precision", "bfloat16", "float16 or bfloat16.")
flags.DEFINE_integer("batch_size", 8, "Images per step.")
flags.DEFINE_integer("image_size", None, "Input size; default: the network's default_image_size.")
flags.DEFINE_integer("rounds", 10, "Timed steps per configuration.")
flags.DEFINE_integer("warmup", 3, "Untimed steps per configuration before timing.")
flags.DEFINE_list("configs", list(benchmarking.CONFIGS), "Configurations to compare.")
flags.DEFINE_string("output_json", None, "Also write the results as JSON here.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    precision = resolve_precision(FLAGS.precision)
    device = benchmarking._device_type()
    print(f"model={FLAGS.model_name} precision={precision.name} batch={FLAGS.batch_size} device={device} "
          f"cpu_features={benchmarking.cpu_features()}", flush=True)
    steps = {}
    for config in FLAGS.configs:
        steps[config] = benchmarking.build_train_step(
            config, FLAGS.model_name, precision, FLAGS.batch_size, FLAGS.image_size)
        print(f"built {config}", flush=True)
    casts = {name: benchmarking.executed_casts(step) for name, step in steps.items()}
    medians = benchmarking.interleaved_medians(
        {name: (lambda s=step: s.session.run(s.train_op)) for name, step in steps.items()},
        FLAGS.rounds, FLAGS.warmup, progress=lambda line: print(line, flush=True))
    base = medians.get("float32")
    rows = []
    print(f"\n{'config':<10} {'median s/step':>14} {'vs float32':>11} {'vs grappler':>12} {'vs floor':>9} "
          f"{'casts run':>10} {'casts built':>12}")
    for name, seconds in medians.items():
        row = {
            "config": name, "median_seconds": seconds,
            "vs_float32": seconds / base if base else None,
            "vs_grappler": seconds / medians["grappler"] if "grappler" in medians else None,
            "vs_floor": seconds / medians["floor"] if "floor" in medians else None,
            "casts_executed": casts[name], "casts_in_graph": steps[name].graph_casts,
        }
        rows.append(row)
        ratio = lambda v: f"{v:.3f}x" if v is not None else "-"  # noqa: E731
        print(f"{name:<10} {seconds:>14.4f} {ratio(row['vs_float32']):>11} {ratio(row['vs_grappler']):>12} "
              f"{ratio(row['vs_floor']):>9} {casts[name]:>10} {steps[name].graph_casts:>12}")
    if "slim_mp" in steps:
        print(f"\nslim_mp pass time: {steps['slim_mp'].pass_seconds:.2f} s")
    if FLAGS.output_json:
        with open(FLAGS.output_json, "w", encoding="utf-8") as handle:
            json.dump({"model": FLAGS.model_name, "precision": precision.name, "batch_size": FLAGS.batch_size,
                       "device": device, "rows": rows,
                       "pass_seconds": steps["slim_mp"].pass_seconds if "slim_mp" in steps else None},
                      handle, indent=2)


if __name__ == "__main__":
    app.run(main)
