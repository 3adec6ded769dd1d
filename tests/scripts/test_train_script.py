"""scripts/train_image_classifier.py as a user runs it: training, resuming, fine-tuning, Ctrl-C, bad input."""

import json
import math
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from datasets_support import three_class_image_folder
from slim_mp.json_files import current_umask
from script_runs import (
    EVAL_SCRIPT,
    LENET_ARGS,
    TRAIN_SCRIPT,
    abort_after,
    check_ok,
    checkpoint_tensor,
    evaluated_lenet,
    finish_or_show_stacks,
    progress_lines,
    run_script,
    script_env,
    sigint_as_in_a_terminal,
    trained_lenet,
)

CHANCE = 0.1  # ten classes


def evaluate(train_dir: str, eval_dir: str, precision: str) -> dict:
    check_ok(run_script(
        EVAL_SCRIPT, f"--checkpoint_path={train_dir}", f"--eval_dir={eval_dir}", "--dataset_name=fashion_mnist",
        "--model_name=lenet", "--batch_size=500", f"--precision={precision}",
    ))
    with open(os.path.join(eval_dir, "metrics.json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_float32_run_prints_key_value_progress_and_saves_the_last_step():
    run = trained_lenet()
    lines = progress_lines(run.stdout)
    assert [int(line["step"]) for line in lines] == [10, 20, 30]
    assert all(math.isfinite(float(line["loss"])) for line in lines)
    assert {(line["loss_scale"], line["skipped"], line["lr"]) for line in lines} == {("1", "0", "0.01")}
    assert checkpoint_tensor(run.train_dir, "global_step") == 30
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(run.train_dir))


def test_bfloat16_run_trains_float32_master_weights_as_well_as_float32(tmp_path):
    """Same seed and steps; test accuracy of the bfloat16 run within 0.1 of the float32 reference."""
    reference = evaluated_lenet().metrics
    mixed_run = trained_lenet("bfloat16")
    mixed = evaluate(mixed_run.train_dir, str(tmp_path / "bf16"), "bfloat16")
    assert reference["accuracy"] > CHANCE + 0.2
    assert abs(mixed["accuracy"] - reference["accuracy"]) <= 0.1
    assert checkpoint_tensor(mixed_run.train_dir, "LeNet/conv1/weights").dtype == np.float32
    assert [int(line["step"]) for line in progress_lines(mixed_run.stdout)] == [10, 20, 30]
    tags = summary_tags(mixed_run.train_dir)
    assert {"summaries/total_loss", "summaries/learning_rate", "summaries/losses/regularization"} <= tags
    assert any("loss_scale" in tag for tag in tags) and any("skipped_steps" in tag for tag in tags)


def test_json_files_the_scripts_write_are_readable_as_the_umask_says():
    """run_info.json, placement.json and metrics.json: 0644 under umask 022, as every other file written is."""
    train_dir = trained_lenet("bfloat16").train_dir
    eval_dir = evaluated_lenet().eval_dir
    written = [os.path.join(train_dir, "run_info.json"), os.path.join(train_dir, "placement.json"),
               os.path.join(eval_dir, "metrics.json")]
    user_mode = 0o666 & ~current_umask()  # the scripts ran under this process's umask
    assert {path: os.stat(path).st_mode & 0o777 for path in written} == {path: user_mode for path in written}


def summary_tags(train_dir: str) -> set:
    """The scalar tags of the TensorBoard events in ``train_dir``."""
    tags = set()
    for name in os.listdir(train_dir):
        if name.startswith("events.out.tfevents"):
            for event in tf.compat.v1.train.summary_iterator(os.path.join(train_dir, name)):
                tags.update(value.tag for value in event.summary.value)
    return tags


def test_resume_continues_the_global_step_and_the_dynamic_loss_scale(tmp_path):
    train_dir = str(tmp_path / "fp16")
    scaling = ("--precision=float16", "--loss_scale=dynamic", "--loss_scale_init=128",
               "--loss_scale_incr_every_n_steps=2", "--log_every_n_steps=1", "--batch_size=16")
    check_ok(run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", "--max_number_of_steps=4", *LENET_ARGS, *scaling))
    assert checkpoint_tensor(train_dir, "global_step") == 4
    saved_scale = float(checkpoint_tensor(train_dir, "loss_scale"))
    assert saved_scale >= 256  # it grew, so a restart from --loss_scale_init would show
    resumed = check_ok(run_script(
        TRAIN_SCRIPT, f"--train_dir={train_dir}", "--max_number_of_steps=6", *LENET_ARGS, *scaling
    ))
    first = progress_lines(resumed.stdout)[0]
    assert int(first["step"]) == 5
    assert float(first["loss_scale"]) >= 0.8 * saved_scale  # at most one shrink (decr_ratio 0.8) from the saved scale
    assert checkpoint_tensor(train_dir, "global_step") == 6


def test_fine_tuning_with_excluded_logits_restores_the_rest(tmp_path):
    pretrained = trained_lenet().train_dir
    three_classes = ("--dataset_name=image_folder", f"--dataset_dir={three_class_image_folder(str(tmp_path))}")
    common = (*LENET_ARGS, *three_classes, f"--checkpoint_path={pretrained}", "--max_number_of_steps=1")
    refused = run_script(TRAIN_SCRIPT, f"--train_dir={tmp_path / 'refused'}", *common)
    assert refused.returncode == 2
    error = refused.stderr.strip().splitlines()[-1]
    assert "LeNet/fc4/weights (checkpoint [1024, 10] float32, model [1024, 3] float32)" in error
    assert "--checkpoint_exclude_scopes=LeNet/fc4" in error
    assert "Traceback" not in refused.stderr

    tuned_dir = str(tmp_path / "tuned")
    check_ok(run_script(TRAIN_SCRIPT, f"--train_dir={tuned_dir}", *common, "--checkpoint_exclude_scopes=LeNet/fc4",
                        "--trainable_scopes=LeNet/fc4"))
    np.testing.assert_array_equal(
        checkpoint_tensor(tuned_dir, "LeNet/conv1/weights"), checkpoint_tensor(pretrained, "LeNet/conv1/weights")
    )
    assert checkpoint_tensor(tuned_dir, "LeNet/fc4/weights").shape == (1024, 3)


def test_ctrl_c_saves_a_checkpoint_at_the_current_step(tmp_path):
    train_dir = str(tmp_path / "interrupted")
    process = subprocess.Popen(
        [sys.executable, TRAIN_SCRIPT, f"--train_dir={train_dir}", "--log_every_n_steps=1", *LENET_ARGS],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=script_env(),
        preexec_fn=sigint_as_in_a_terminal,
    )
    try:
        with abort_after(process, 120):
            for line in process.stdout:
                if line.startswith("step=3 "):
                    process.send_signal(signal.SIGINT)
                    break
        _, stderr = finish_or_show_stacks(process, 120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr[-2000:]
    assert stderr.strip().splitlines()[-1] == "error: interrupted"
    assert checkpoint_tensor(train_dir, "global_step") >= 3


def _not_a_folder(tmp_path) -> str:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    return str(blocker / "train")


BAD_INPUT = {
    "unknown model": (["--model_name=resnet_v9"], "--model_name='resnet_v9'"),
    "unknown dataset": (["--dataset_name=mnist_nope"], "--dataset_name"),
    "unknown optimizer": (["--optimizer=lamb"], "--optimizer='lamb'"),
    "unknown precision": (["--precision=float8"], "--precision='float8'"),
    "missing dataset dir": (["--dataset_name=cifar10"], "--dataset_dir"),
    "empty dataset dir": (["--dataset_name=cifar10", "--dataset_dir={empty}"], "--dataset_dir="),
    "wrong checkpoint": (["--checkpoint_path={empty}/model.ckpt-7"], "--checkpoint_path="),
    "GPU clones without GPUs": (["--num_clones=2"], "--num_clones=2 puts one clone per GPU"),
    "task out of range": (["--worker_replicas=2", "--num_ps_tasks=1", "--task=2"], "--task=2 is out of range"),
    "bad flag value": (["--batch_size=many"], "--batch_size"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_one_error_line_naming_the_flag_without_traceback(case, tmp_path):
    args, expected = BAD_INPUT[case]
    (tmp_path / "empty").mkdir()
    args = [arg.format(empty=tmp_path / "empty") for arg in args]
    process = run_script(TRAIN_SCRIPT, f"--train_dir={tmp_path / 'train'}", *LENET_ARGS, *args)
    assert process.returncode == 2
    errors = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0], process.stderr[-2000:]
    assert errors[0] == process.stderr.strip().splitlines()[-1]
    assert "Traceback" not in process.stderr


def test_unwritable_train_dir_is_named_and_verbose_adds_the_traceback(tmp_path):
    train_dir = _not_a_folder(tmp_path)
    quiet = run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", *LENET_ARGS)
    assert quiet.returncode == 2
    assert quiet.stderr.strip().splitlines()[-1].startswith(f"error: --train_dir={train_dir} is not a writable folder")
    assert "Traceback" not in quiet.stderr
    verbose = run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", *LENET_ARGS, "--verbose")
    assert verbose.returncode == 2 and "Traceback" in verbose.stderr


@pytest.mark.parametrize("size, refused", [(37, True), (36, False)])
def test_a_train_size_cifarnet_preprocessing_cannot_crop_is_one_error_naming_the_flag(tmp_path, size, refused):
    # Fashion-MNIST's 28x28 images padded by 4 a side give at most 36: TensorFlow would stop at the first batch
    # with an assertion inside random_crop.
    run = run_script(TRAIN_SCRIPT, f"--train_dir={tmp_path}", "--model_name=cifarnet", "--dataset_name=fashion_mnist",
                     f"--train_image_size={size}", "--max_number_of_steps=1", "--batch_size=2", "--precision=float32")
    if not refused:
        check_ok(run)
        return
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1] == (
        "error: --train_image_size=37 is larger than the cifarnet preprocessing can crop from this data set's 28x28 "
        "images (padded by 4 a side: at most 36); pass --train_image_size=36 or less, or a preprocessing that "
        "resizes (e.g. --preprocessing_name=inception).")
