"""Faults a run meets from outside, tried with the scripts as a user runs them: data that goes away mid-run,
memory that runs out."""

import os
import resource
import subprocess
import sys

import pytest

from datasets_support import three_class_image_folder
from script_runs import (
    TRAIN_SCRIPT, abort_after, check_bad_input, finish_or_show_stacks, preloaded_tasks, script_env,
)

TIMEOUT_S = 120


@pytest.fixture(scope="module")
def task_command():
    """Command lines of scripts that stream their output, forked from one preloaded interpreter."""
    with preloaded_tasks() as command:
        yield command


def test_a_shard_removed_mid_run_ends_training_with_one_error_naming_it(tmp_path, task_command):
    """Training without a step limit: the run can only end by the removed shard, whenever its next pass comes."""
    records = three_class_image_folder(str(tmp_path), num_shards=3)
    removed = os.path.join(records, "train-00001-of-00003.tfrecord")
    process = subprocess.Popen(
        task_command(TRAIN_SCRIPT, [f"--train_dir={tmp_path / 'train'}", "--dataset_name=image_folder",
                                    f"--dataset_dir={records}", "--model_name=lenet", "--batch_size=4",
                                    "--log_every_n_steps=1", "--num_preprocessing_threads=1"]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=script_env())
    try:
        with abort_after(process, TIMEOUT_S):
            for line in process.stdout:
                if line.startswith("step="):
                    os.remove(removed)
                    break
        stdout, stderr = finish_or_show_stacks(process, TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
    check_bad_input(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr),
                    f"error: TFRecord file {removed} of dataset 'image_folder' is gone (No such file or directory)")


# Out of memory, under a real address-space limit (ulimit -v) set in the child before it starts. The limit
# leaves room for the interpreter and TensorFlow's threads on machines of many cores; the sizes asked for
# are far beyond it.
ADDRESS_SPACE_LIMIT = 6 * 2 ** 30


def limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def run_limited(argv: list, **environment: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=dict(script_env(), **environment),
                          timeout=TIMEOUT_S, preexec_fn=limit_address_space)


def test_a_batch_that_cannot_fit_the_address_space_is_one_error_before_the_build_goes_on(tmp_path):
    """LeNet at batch 100000 holds ~33 GiB of tensors at its peak: refused before the pass or any step runs."""
    process = run_limited([sys.executable, TRAIN_SCRIPT, f"--train_dir={tmp_path / 'train'}",
                           "--dataset_name=fashion_mnist", "--model_name=lenet", "--batch_size=100000",
                           "--max_number_of_steps=1"])
    check_bad_input(process, "error: the train step of lenet at --batch_size=100000 in float32 cannot fit: its "
                             "tensors need ")
    assert "(ulimit -v); lower --batch_size, or find the largest batch that fits with: python scripts/benchmark.py " \
           "--models=lenet --memory_budget_mb=<MiB for the step>" in process.stderr
    assert not any(name.startswith("model.ckpt") for name in os.listdir(tmp_path / "train"))


# A program run the way every script runs its main (slim_mp.training.cli.run), whose step allocates 16 GiB; it names
# its step as the training, evaluation and export functions name theirs.
STEP_OUT_OF_MEMORY = """
import tensorflow as tf
from slim_mp.training import StepSettings, cli, out_of_memory_named


def main():
    graph = tf.Graph()
    with graph.as_default():
        step = tf.reduce_sum(tf.random.uniform([2 ** 32]))
    with out_of_memory_named(StepSettings("lenet", 64, "bfloat16")), tf.compat.v1.Session(graph=graph) as session:
        session.run(step)


cli.run(main)
"""


def test_a_step_that_runs_out_of_memory_is_one_error_naming_the_batch_and_the_benchmark_command():
    """oneDNN off: its allocator waits 10 s for memory to be freed before it reports, TensorFlow's plain one does not
    (the error that reaches the script is the same)."""
    process = run_limited([sys.executable, "-c", STEP_OUT_OF_MEMORY], TF_ENABLE_ONEDNN_OPTS="0")
    check_bad_input(process, "error: out of memory (ResourceExhaustedError allocating shape[4294967296] in "
                             "random_uniform/RandomUniform) with lenet at --batch_size=64 in bfloat16; this process "
                             "may use 6.0 GiB (ulimit -v); lower --batch_size, or find the largest batch that fits "
                             "with: python scripts/benchmark.py --models=lenet --precisions=bfloat16 "
                             "--memory_budget_mb=<MiB for the step> --output_dir=runs/memory_fit")
