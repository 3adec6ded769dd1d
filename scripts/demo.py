"""``make demo``: float32 against mixed precision on the bundled Fashion-MNIST, within a fixed time budget.

In about the time of ``--budget_seconds``, imports included, on any CPU: what the device can do in
bfloat16 (or float16 on a GPU with tensor cores); float32 and mixed-precision CifarNet train steps
timed side by side (and at 128x128 where that is native and fits); both trained from scratch for as
many steps as fit, each in a fresh process, evaluated, and a comparison table. The pieces live in
``slim_mp.measure.demo``; what the demo prints and why: docs/operations.md, "The demo".

Only the demo's own lines reach the screen: TensorFlow's and absl's go to ``<output_dir>/tensorflow.log``.

    python scripts/demo.py [--budget_seconds 210] [--steps N] [--output_dir runs/demo]

Bad input prints one ``error: ...`` line and exits with status 2 (``--verbose`` adds the traceback).
"""

import atexit
import os
import sys
import tempfile


def _native_stderr_to_temporary_file() -> str:
    """Point file descriptor 2 at a temporary file, keep Python's ``sys.stderr`` on the terminal; return the path.

    TensorFlow's C++ logging writes to descriptor 2 from its import on, before the flags name the
    output folder; ``main`` then moves what was written into the output folder's log.
    """
    terminal = os.fdopen(os.dup(2), "w", buffering=1)
    handle, path = tempfile.mkstemp(prefix="slim_mp_demo_", suffix=".log")
    os.dup2(handle, 2)
    os.close(handle)
    sys.stderr = terminal
    atexit.register(lambda: os.path.exists(path) and os.remove(path))
    return path


# Only the demo's own process: the training runs' processes import this file under another name and
# inherit descriptor 2, by then the output folder's log.
EARLY_LOG = _native_stderr_to_temporary_file() if __name__ == "__main__" else None

import shutil  # noqa: E402  (after the redirection above, like every import below)
import time  # noqa: E402

from absl import flags  # noqa: E402

from slim_mp.datasets import get_dataset  # noqa: E402
from slim_mp.devices import detect_device, precision_support, preferred_low_precision  # noqa: E402
from slim_mp.measure.demo import budget, speed, training_runs  # noqa: E402
from slim_mp.measure.demo.training_runs import say  # noqa: E402
from slim_mp.measure.demo.workload import (BATCH_SIZE, DATASET, IMAGE_SIZE, LARGE_IMAGE_SIZE,  # noqa: E402
                                           LOG_FILE_NAME, MODEL, SEED)
from slim_mp.training import cli, prepare_output_dir  # noqa: E402
from slim_mp.training.library_logs import send_library_logs_to  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_float("budget_seconds", budget.DEFAULT_BUDGET_SECONDS, "Wall time the whole demo aims at, imports "
                   "included; the training steps are sized to fit it.", lower_bound=budget.MIN_BUDGET_SECONDS)
flags.DEFINE_integer("steps", None, "Training steps of each run; unset: as many as fit --budget_seconds "
                     f"(at most {budget.MAX_STEPS}).", lower_bound=1)
flags.DEFINE_string("output_dir", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                               "runs", "demo"), "Where the runs and the log go.")


def main() -> None:
    """Explain the device, time both precisions, train both within the budget, print the table."""
    started = budget.process_started()
    budget_seconds, output_dir = FLAGS.budget_seconds, FLAGS.output_dir
    prepare_output_dir(output_dir, "--output_dir")
    log_path = os.path.join(output_dir, LOG_FILE_NAME)
    shutil.copyfile(EARLY_LOG or os.devnull, log_path)
    send_library_logs_to(log_path)
    startup_seconds = time.monotonic() - started
    device = detect_device()
    low = preferred_low_precision(device)
    native = precision_support(device)[low].native
    say(f"slim_mp demo: {MODEL} on {DATASET}, float32 vs {low}, aiming at {budget_seconds:.0f}s "
        f"(TensorFlow's log: {log_path})")
    for line in speed.describe_device(device, low):
        say(line)

    say(f"\n== speed: {MODEL} train steps at {IMAGE_SIZE}x{IMAGE_SIZE}, batch {BATCH_SIZE}, random images, "
        f"float32 and {low} interleaved (first the measured placement times the ops)")
    decisions_file = os.path.join(output_dir, f"placement_{low}.json")
    if os.path.exists(decisions_file):
        os.remove(decisions_file)
    if not native:
        say(f"  ({low} is emulated: the placement decides from per-op timings alone, not whole steps, "
            "to stay within the budget)")
    small = speed.time_side_by_side(low, IMAGE_SIZE, budget.SPEED_SHARE * budget_seconds,
                                    speed.demo_placement_options(native, decisions_file))
    say(speed.placement_line(low, small))
    say(speed.speed_line(low, small, native))
    skip_large = budget.large_timing_skipped(low, native, small, budget_seconds)
    if skip_large:
        say(f"  {LARGE_IMAGE_SIZE}x{LARGE_IMAGE_SIZE}: {skip_large}")
    else:
        large = speed.time_side_by_side(low, LARGE_IMAGE_SIZE, budget.LARGE_SPEED_SHARE * budget_seconds,
                                        speed.demo_placement_options(native, None), budget.LARGE_MAX_ROUNDS)
        say(speed.speed_line(low, large, native))

    seconds_left = started + budget_seconds - time.monotonic()
    steps = FLAGS.steps or budget.steps_that_fit(seconds_left, startup_seconds, small)
    sized = "" if FLAGS.steps else f", as many as fit the {budget_seconds:.0f}s budget at the step times above"
    say(f"\n== training {MODEL} from scratch, {steps} steps in each precision{sized}")
    for note in (budget.overrun_note(steps, seconds_left, startup_seconds, small), budget.few_steps_note(steps)):
        if note:
            say(note)
    rows = [training_runs.train_in_fresh_process(precision, steps, output_dir,
                                                 None if precision == "float32" else decisions_file)
            for precision in ("float32", low)]

    say(f"\n{MODEL} on {DATASET} ({IMAGE_SIZE}x{IMAGE_SIZE}, batch {BATCH_SIZE}, {steps} steps, seed {SEED}, "
        f"{get_dataset(DATASET, 'test').num_samples} test images)")
    say(training_runs.format_table(rows, small.speedup, speed.below_one_reason(low, small, native)))
    say(f"outputs under {output_dir}; wall time {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    cli.run(main)
