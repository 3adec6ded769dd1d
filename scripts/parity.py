"""Accuracy parity: train one model in float32 and in mixed precision from the same initial weights, over seeds.

Per seed, float32 initial weights are saved once and both precisions train from them for the
same steps on the same batches, as does the control (``--control``, on by default): float32 again
from those weights perturbed by one part in a million, to show how far float32 moves from itself.
Each run is evaluated on the held-out split. The report gives, per arm, the paired top-1 gap
against float32 with its 95% interval over seeds and an equivalence verdict against
``--equivalence_margin`` (two one-sided t tests). Writes, into ``--output_dir``: ``parity.json``
(options, mean ± std per arm, the gaps, every run with its per-step loss, loss scale and
skipped-step count), ``parity.md`` (the tables) and ``loss_curves.png`` (plus the loss-scale
trajectory for float16). Runs live under ``--output_dir/seed_<n>/``. ``--placement`` picks the
mixed-precision runs' placement (measured or static; unset: training's default), and each of those
runs records how many conv/matmul-class ops it ran low. Networks with batch norm train with
``--batch_norm_decay`` lowered for the run's length unless told otherwise (their official decays
are for far longer runs). An interval too wide to decide ("inconclusive") narrows with more seeds:
the same command with new ``--seeds`` and the same ``--output_dir`` trains only those and reports
over all of them.

    python scripts/parity.py --model_name mobilenet_v1 --dataset_name fashion_mnist_full \\
        --preprocessing_name cifarnet --image_size 32 --placement static --steps 1000 \\
        --seeds 0,1,2,3,4,5,6,7 --output_dir runs/parity_mobilenet

Bad input prints one ``error: ...`` line and exits with status 2 (``--verbose`` adds the traceback).
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

import time

from slim_mp.measure.parity.parity_config import ParityConfig
from slim_mp.measure.parity.parity_report import ParityReport
from slim_mp.measure.parity.parity_run import run_parity
from slim_mp.training import cli

cli.define_flags(ParityConfig)


def main() -> None:
    """Run the comparison, write its files and print the summary table."""
    config = cli.config_from_flags(ParityConfig)
    started = time.perf_counter()
    result = run_parity(config, print_line=lambda line: print(line, flush=True))
    report = ParityReport(result)
    paths = report.write_reports(config.output_dir)
    print()
    print(report.to_markdown())
    print(f"wrote {', '.join(paths.values())}; wall time {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    cli.run(main)
