"""Evaluations racing a trainer that saves and rotates its checkpoints every step, all as real processes.

The trainer keeps one checkpoint (``--max_to_keep=1``) and saves at every step, so the checkpoint an
evaluation picks is deleted a step later. Asserted is only what holds in every scheduling order:
each evaluation either prints its metrics and writes the same ones to metrics.json (with the step
and the checkpoint they came from), or ends with one ``error:`` line; never a traceback.
"""

import json
import os
import pathlib
import re
import signal
import subprocess
import time

import pytest

from script_runs import EVAL_SCRIPT, LENET_ARGS, TRAIN_SCRIPT, abort_after, finish_or_show_stacks, preloaded_tasks
from script_runs import script_env

TIMEOUT_S = 180
EVALUATIONS = 3
METRICS_LINE = re.compile(r"^accuracy=(?P<accuracy>\S+) top5=\S+ loss=\S+ num_examples=2000 "
                          r"global_step=(?P<step>\d+) checkpoint=(?P<checkpoint>\S+)$")


@pytest.fixture(scope="module")
def task_command():
    with preloaded_tasks() as command:
        yield command


def start(command: list, **streams) -> subprocess.Popen:
    return subprocess.Popen(command, text=True, env=script_env(),
                            **(streams or {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}))


def wait_for(path: pathlib.Path, process: subprocess.Popen) -> None:
    """Until ``path`` exists (the trainer's first checkpoint is listed); fail if ``process`` ends first."""
    deadline = time.monotonic() + TIMEOUT_S
    while not path.exists():
        assert process.poll() is None and time.monotonic() < deadline, "the trainer saved no checkpoint"
        time.sleep(0.1)


def test_evaluations_started_while_the_trainer_rotates_every_step_print_metrics_or_one_error(task_command, tmp_path):
    train_dir = tmp_path / "train"
    with open(tmp_path / "trainer.out", "w") as trainer_out, open(tmp_path / "trainer.err", "w") as trainer_err:
        trainer = start(task_command(TRAIN_SCRIPT, [f"--train_dir={train_dir}", "--save_interval_secs=0",
                                                    "--max_to_keep=1", *LENET_ARGS]),
                        stdout=trainer_out, stderr=trainer_err)
    outcomes = []
    try:
        with abort_after(trainer, TIMEOUT_S):
            wait_for(train_dir / "checkpoint", trainer)
            evaluations = [start(task_command(EVAL_SCRIPT, [
                f"--checkpoint_path={train_dir}", f"--eval_dir={tmp_path / f'eval{index}'}",
                "--dataset_name=fashion_mnist", "--model_name=lenet", "--batch_size=500"]))
                for index in range(EVALUATIONS)]
            for index, evaluation in enumerate(evaluations):
                stdout, stderr = finish_or_show_stacks(evaluation, TIMEOUT_S)
                outcomes.append((index, evaluation.returncode, stdout, stderr))
            assert trainer.poll() is None, "the trainer stopped before the evaluations ended"
        trainer.send_signal(signal.SIGTERM)
        finish_or_show_stacks(trainer, TIMEOUT_S)
    finally:
        if trainer.poll() is None:
            trainer.kill()
    assert trainer.returncode == 143, (tmp_path / "trainer.err").read_text()[-2000:]
    for index, returncode, stdout, stderr in outcomes:
        assert "Traceback" not in stderr, stderr[-3000:]
        printed = [METRICS_LINE.match(line) for line in stdout.splitlines() if METRICS_LINE.match(line)]
        metrics_file = tmp_path / f"eval{index}" / "metrics.json"
        if printed:
            (line,) = printed
            assert returncode == 0, stderr[-3000:]
            metrics = json.loads(metrics_file.read_text())  # metrics printed are metrics written
            assert f"{metrics['accuracy']:.4f}" == line["accuracy"]
            assert (metrics["global_step"], metrics["checkpoint"]) == (int(line["step"]), line["checkpoint"])
            assert line["checkpoint"] == os.path.join(str(train_dir), f"model.ckpt-{line['step']}")
        else:
            assert returncode == 2, stderr[-3000:]
            errors = [text for text in stderr.splitlines() if text.startswith("error:")]
            assert len(errors) == 1 and errors[0] == stderr.strip().splitlines()[-1], stderr[-3000:]
            assert not metrics_file.exists()
