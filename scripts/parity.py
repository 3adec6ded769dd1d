"""Accuracy parity: train one model in float32 and in mixed precision from the same initial weights, over seeds.

Per seed, float32 initial weights are saved once and both precisions train from them for the
same steps on the same batches; each run is evaluated on the held-out split. Writes, into
``--output_dir``: ``parity.json`` (options, mean ± std per precision, every run with its per-step
loss, loss scale and skipped-step count), ``parity.md`` (the tables) and ``loss_curves.png``
(plus the loss-scale trajectory for float16). Runs live under ``--output_dir/seed_<n>/``.

    python scripts/parity.py --model_name lenet --dataset_name fashion_mnist --precision bfloat16 \\
        --steps 1000 --seeds 0,1,2 --output_dir runs/parity_lenet

Bad input prints one ``error: ...`` line and exits with status 2 (``--verbose`` adds the traceback).
"""

import argparse
import sys
import time
import traceback
from typing import Any, Dict, NoReturn, Tuple

from slim_mp.measure.parity import ParityConfig, run_parity
from slim_mp.measure.parity_plot import plot_loss_curves
from slim_mp.measure.parity_report import to_markdown, write_report

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
DEFAULTS = ParityConfig()


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one ``error: ...`` line, like every other failure here."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}; run with --help to see the options.", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def parse_seeds(text: str) -> Tuple[int, ...]:
    """``"0,1,2"`` -> ``(0, 1, 2)``."""
    try:
        return tuple(int(item) for item in text.split(",") if item.strip())
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers such as 0,1,2") \
            from error


def parse_args() -> Tuple[Dict[str, Any], bool]:
    """Return the comparison's options (``ParityConfig`` fields) and whether to print tracebacks."""
    parser = OneLineErrorParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_name", default=DEFAULTS.model_name, help="network name (nets/nets_factory.py)")
    parser.add_argument("--dataset_name", default=DEFAULTS.dataset_name, help="e.g. fashion_mnist or image_folder")
    parser.add_argument("--dataset_dir", default=DEFAULTS.dataset_dir,
                        help="folder of the data set's files (unset for the bundled fashion_mnist subset)")
    parser.add_argument("--precision", default=DEFAULTS.precision, help="the mixed precision: bfloat16 or float16")
    parser.add_argument("--steps", type=int, default=DEFAULTS.steps, help="training steps of every run")
    parser.add_argument("--seeds", type=parse_seeds, default=DEFAULTS.seeds, help="comma-separated seeds, e.g. 0,1,2")
    parser.add_argument("--output_dir", default=DEFAULTS.output_dir, help="where results and runs are written")
    parser.add_argument("--batch_size", type=int, default=DEFAULTS.batch_size, help="images per training step")
    parser.add_argument("--image_size", type=int, default=DEFAULTS.image_size,
                        help="train and eval image size; unset means the network's default")
    parser.add_argument("--learning_rate", type=float, default=DEFAULTS.learning_rate,
                        help="initial learning rate (momentum 0.9, linear decay to 1%% over the run)")
    parser.add_argument("--log_every_n_steps", type=int, default=DEFAULTS.log_every_n_steps,
                        help="print a progress line every this many steps")
    parser.add_argument("--preprocessing_name", default=DEFAULTS.preprocessing_name,
                        help="preprocessing; unset means the network's own")
    parser.add_argument("--eval_split_name", default=DEFAULTS.eval_split_name,
                        help="split to evaluate on; unset means test, else validation")
    parser.add_argument("--verbose", action="store_true", help="print the full traceback when the run fails")
    args = vars(parser.parse_args())
    verbose = args.pop("verbose")
    return args, verbose


def main() -> None:
    """Run the comparison, write its files and print the summary table."""
    options, verbose = parse_args()
    try:
        config = ParityConfig(**options)
        started = time.perf_counter()
        result = run_parity(config, print_line=lambda line: print(line, flush=True))
        paths = write_report(result)
        paths["plot"] = plot_loss_curves(result)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except (ValueError, TypeError) as error:
        if verbose:
            traceback.print_exception(error)
        print(f"error: {error}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    print()
    print(to_markdown(result))
    print(f"wrote {', '.join(paths.values())}; wall time {time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
