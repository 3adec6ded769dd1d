"""Resuming or evaluating with other flags than the checkpoint was written with: named, never a late traceback.

Also: every checkpoint carries its ``.meta`` graph, loadable with ``import_meta_graph``.
"""

import os
import shutil

import pytest
import tensorflow as tf

from script_runs import EVAL_SCRIPT, LENET_ARGS, TRAIN_SCRIPT, check_ok, checkpoint_tensor, run_script

tf1 = tf.compat.v1

# LeNet at 28x28 flattens 7*7*64 = 3136 features into fc3; at 32x32, 8*8*64 = 4096.
FC3_MISFIT = "LeNet/fc3/weights (checkpoint [3136, 1024] float32, model [4096, 1024] float32)"


@pytest.fixture(scope="module")
def float32_run(tmp_path_factory):
    train_dir = str(tmp_path_factory.mktemp("mismatch") / "float32")
    check_ok(run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", "--max_number_of_steps=2", "--batch_size=8",
                        *LENET_ARGS))
    return train_dir


def last_error_line(process):
    assert process.returncode == 2, process.stderr[-2000:]
    assert "Traceback" not in process.stderr
    return process.stderr.strip().splitlines()[-1]


def test_resume_at_another_train_image_size_names_the_variable_shapes_and_flag(float32_run, tmp_path):
    train_dir = str(tmp_path / "copy")
    shutil.copytree(float32_run, train_dir)
    line = last_error_line(run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", "--max_number_of_steps=3",
                                      *LENET_ARGS, "--train_image_size=32"))
    assert FC3_MISFIT in line and "another --train_image_size" in line, line
    assert checkpoint_tensor(train_dir, "global_step") == 2  # nothing overwritten


def test_eval_at_another_eval_image_size_names_the_variable_shapes_and_flag(float32_run, tmp_path):
    line = last_error_line(run_script(
        EVAL_SCRIPT, f"--checkpoint_path={float32_run}", f"--eval_dir={tmp_path}", "--dataset_name=fashion_mnist",
        "--model_name=lenet", "--max_num_batches=1", "--eval_image_size=32",
    ))
    assert FC3_MISFIT in line and "another --eval_image_size" in line, line


def test_resume_with_another_optimizer_names_the_missing_slots(float32_run, tmp_path):
    train_dir = str(tmp_path / "copy")
    shutil.copytree(float32_run, train_dir)
    line = last_error_line(run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", "--max_number_of_steps=3",
                                      *LENET_ARGS, "--optimizer=rmsprop"))
    assert "LeNet/conv1/weights/RMSProp" in line and "another --optimizer" in line, line


def test_resume_in_another_precision_warns_naming_both(float32_run, tmp_path):
    train_dir = str(tmp_path / "copy")
    shutil.copytree(float32_run, train_dir)
    process = check_ok(run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", "--max_number_of_steps=3",
                                  "--batch_size=8", *LENET_ARGS, "--precision=bfloat16"))
    warnings = [line for line in process.stderr.splitlines() if "resuming it in" in line]
    assert len(warnings) == 1, process.stderr[-2000:]
    assert "was trained in float32; resuming it in --precision=bfloat16" in warnings[0]
    assert checkpoint_tensor(train_dir, "global_step") == 3


def test_every_checkpoint_has_a_meta_graph_that_import_meta_graph_loads(float32_run):
    latest = tf.train.latest_checkpoint(float32_run)
    assert os.path.exists(latest + ".meta")
    with tf.Graph().as_default():
        saver = tf1.train.import_meta_graph(latest + ".meta")
        with tf1.Session() as session:
            saver.restore(session, latest)
            variable = next(v for v in tf1.global_variables() if v.op.name == "LeNet/conv1/weights")
            weights = session.run(variable)
    assert (weights == checkpoint_tensor(float32_run, "LeNet/conv1/weights")).all()
