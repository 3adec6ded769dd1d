"""Time to accuracy: float32 and mixed precision trained side by side, top-1 against train seconds.

Both precisions start from one float32 checkpoint, read the same batches and take turns of
``--chunk_steps`` steps in this process, so both see the same machine state; every
``--eval_every_n_steps`` steps each is evaluated on the held-out split. Each precision's clock
counts only its own train steps. Writes, into ``--output_dir``: ``time_to_accuracy.json`` (every
evaluation), ``time_to_accuracy.md`` (float32's final top-1 and the train seconds each precision
needed to come within ``--equivalence_margin`` of it) and ``time_to_accuracy.png`` (top-1 against
train seconds).

    python scripts/time_to_accuracy.py --model_name resnet_v1_18 --dataset_name fashion_mnist_full \\
        --preprocessing_name cifarnet --image_size 128 --steps 3000 --eval_every_n_steps 250 \\
        --output_dir runs/tta_r18

Bad input prints one ``error: ...`` line and exits with status 2 (``--verbose`` adds the traceback).
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

import time

from slim_mp.measure.parity.time_to_accuracy import TimeToAccuracyConfig, run_time_to_accuracy
from slim_mp.measure.parity.time_to_accuracy_report import time_to_accuracy_markdown, write_time_to_accuracy_reports
from slim_mp.training import cli

cli.define_flags(TimeToAccuracyConfig)


def main() -> None:
    """Run both precisions side by side, write the files and print the table."""
    config = cli.config_from_flags(TimeToAccuracyConfig)
    started = time.perf_counter()
    result = run_time_to_accuracy(config, print_line=lambda line: print(line, flush=True))
    paths = write_time_to_accuracy_reports(result, config.output_dir)
    print()
    print(time_to_accuracy_markdown(result))
    print(f"wrote {', '.join(paths.values())}; wall time {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    cli.run(main)
