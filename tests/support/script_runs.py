"""Run the training and evaluation scripts as subprocesses, the way a user does, and read what they leave."""

import dataclasses
import os
import re
import subprocess
import sys
from typing import Dict, List

import tensorflow as tf

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN_SCRIPT = os.path.join(REPO_ROOT, "scripts", "train_image_classifier.py")
EVAL_SCRIPT = os.path.join(REPO_ROOT, "scripts", "eval_image_classifier.py")
TIMEOUT_S = 300

# A tiny, fast run: LeNet on the bundled Fashion-MNIST subset.
LENET_ARGS = (
    "--dataset_name=fashion_mnist", "--model_name=lenet", "--batch_size=32", "--optimizer=momentum",
    "--learning_rate=0.01", "--learning_rate_decay_type=fixed", "--num_preprocessing_threads=2", "--seed=0",
)
PROGRESS_LINE = re.compile(
    r"^step=(?P<step>\d+) loss=(?P<loss>\S+) loss_scale=(?P<loss_scale>\S+) skipped=(?P<skipped>\d+) "
    r"lr=(?P<lr>\S+) images/s=(?P<images_per_second>\d+)$"
)


def script_env() -> Dict[str, str]:
    return dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2")


def run_script(script: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``script`` with ``args``; return the finished process (text stdout/stderr)."""
    return subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, env=script_env(), timeout=TIMEOUT_S
    )


def check_ok(process: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert process.returncode == 0, process.stderr[-3000:]
    return process


def check_bad_input(process: subprocess.CompletedProcess, expected_start: str) -> None:
    """Assert the CLI convention for bad input: exit status 2 and one ``error:`` line, last, with no traceback."""
    assert process.returncode == 2, process.stderr[-2000:]
    errors = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(expected_start), process.stderr[-2000:]
    assert errors[0] == process.stderr.strip().splitlines()[-1] and "Traceback" not in process.stderr


def progress_lines(stdout: str) -> List[Dict[str, str]]:
    """The progress lines of a training run's stdout, each as its key=value fields (asserting the format)."""
    lines = [line for line in stdout.splitlines() if line.startswith("step=")]
    matches = [PROGRESS_LINE.match(line) for line in lines]
    assert all(matches), lines
    return [match.groupdict() for match in matches]


def checkpoint_tensor(train_dir: str, name: str):
    """The value of ``name`` in the latest checkpoint of ``train_dir``."""
    return tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir)).get_tensor(name)


@dataclasses.dataclass(frozen=True)
class TrainedRun:
    train_dir: str
    stdout: str


_TRAINED: Dict[str, TrainedRun] = {}


def trained_lenet(base_dir: str, precision: str = "float32", steps: int = 30) -> TrainedRun:
    """Train LeNet once per process and precision under ``base_dir`` (later calls reuse the run)."""
    key = f"{precision}-{steps}"
    if key not in _TRAINED:
        train_dir = os.path.join(base_dir, key)
        process = check_ok(run_script(
            TRAIN_SCRIPT, f"--train_dir={train_dir}", f"--precision={precision}",
            f"--max_number_of_steps={steps}", "--log_every_n_steps=10", *LENET_ARGS,
        ))
        _TRAINED[key] = TrainedRun(train_dir, process.stdout)
    return _TRAINED[key]
