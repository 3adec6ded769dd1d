"""Resuming from a --train_dir whose newest checkpoint or state file is damaged: never a silent restart.

One LeNet run saves checkpoints at steps 1, 2 and 3; each test damages a copy and resumes it to step 4.
"""

import logging
import os
import shutil

import pytest
import tensorflow as tf

from script_runs import EVAL_SCRIPT, LENET_ARGS, TRAIN_SCRIPT, check_ok, checkpoint_tensor, progress_lines, run_script
from slim_mp.training.loop import RUN_INFO_FILENAME, _recorded_precision

pytestmark = pytest.mark.slow  # one training subprocess per case

SAVED_STEPS = 3
DATA = "model.ckpt-3.data-00000-of-00001"
INDEX = "model.ckpt-3.index"
FAST = ("--batch_size=8", "--log_every_n_steps=1", "--save_interval_secs=0")


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    """A train_dir holding checkpoints of steps 1, 2 and 3 (a save after every step)."""
    train_dir = str(tmp_path_factory.mktemp("damage") / "original")
    check_ok(run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", f"--max_number_of_steps={SAVED_STEPS}",
                        *LENET_ARGS, *FAST))
    return train_dir


def damaged_copy(saved_run, tmp_path, damage):
    train_dir = str(tmp_path / "copy")
    shutil.copytree(saved_run, train_dir)
    damage(train_dir)
    return train_dir


def resume(train_dir, steps=SAVED_STEPS + 1):
    return run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", f"--max_number_of_steps={steps}", *LENET_ARGS, *FAST)


def truncate(name, size):
    def damage(train_dir):
        with open(os.path.join(train_dir, name), "r+b") as handle:
            handle.truncate(size)
    return damage


def overwrite(name, offset, garbage=b"\x5a" * 64):
    def damage(train_dir):
        with open(os.path.join(train_dir, name), "r+b") as handle:
            handle.seek(offset)
            handle.write(garbage)
    return damage


def delete(name):
    def damage(train_dir):
        os.remove(os.path.join(train_dir, name))
    return damage


def warnings_of(stderr):
    return [line for line in stderr.splitlines() if line.startswith("W") and ("_dir=" in line or "_path=" in line)]


CHECKPOINT_DAMAGE = {
    "truncated data": (truncate(DATA, 1000), DATA),
    "garbled data": (overwrite(DATA, 5000), DATA),
    "garbled index": (overwrite(INDEX, 0, b"\x00" * 200), INDEX),
    "deleted index": (delete(INDEX), INDEX),
}


@pytest.mark.parametrize("case", sorted(CHECKPOINT_DAMAGE))
def test_a_damaged_newest_checkpoint_is_named_and_the_previous_one_resumed(case, saved_run, tmp_path):
    damage, file_name = CHECKPOINT_DAMAGE[case]
    train_dir = damaged_copy(saved_run, tmp_path, damage)
    process = check_ok(resume(train_dir))
    assert int(progress_lines(process.stdout)[0]["step"]) == SAVED_STEPS  # resumed at step 2, not from 0
    warning = warnings_of(process.stderr)
    assert len(warning) == 1 and file_name in warning[0] and "resuming from model.ckpt-2" in warning[0], warning
    assert f"--train_dir={train_dir}: skipped damaged checkpoint(s): " in warning[0]  # the flag, as typed
    assert checkpoint_tensor(train_dir, "global_step") == SAVED_STEPS + 1


def test_no_intact_checkpoint_is_one_error_line_naming_every_file(saved_run, tmp_path):
    def damage_all(train_dir):
        for step in range(1, SAVED_STEPS + 1):
            truncate(f"model.ckpt-{step}.data-00000-of-00001", 100)(train_dir)

    train_dir = damaged_copy(saved_run, tmp_path, damage_all)
    process = resume(train_dir)
    assert process.returncode == 2
    assert "Traceback" not in process.stderr
    last = process.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: --train_dir={train_dir} holds checkpoints but none is intact")
    assert all(f"model.ckpt-{step}.data-00000-of-00001" in last for step in range(1, SAVED_STEPS + 1))


STATE_DAMAGE = {
    "truncated": truncate("checkpoint", 20),
    "empty": truncate("checkpoint", 0),
    "garbled": overwrite("checkpoint", 0, b"\xff\xfe\x00garbled"),
}


@pytest.mark.parametrize("case", sorted(STATE_DAMAGE))
def test_a_damaged_state_file_is_rebuilt_from_the_checkpoints_present(case, saved_run, tmp_path):
    train_dir = damaged_copy(saved_run, tmp_path, STATE_DAMAGE[case])
    process = check_ok(resume(train_dir))
    assert int(progress_lines(process.stdout)[0]["step"]) == SAVED_STEPS + 1  # resumed at step 3
    assert any("state file was damaged" in line for line in warnings_of(process.stderr))
    state = tf.train.get_checkpoint_state(train_dir)
    listed = [os.path.basename(path) for path in state.all_model_checkpoint_paths]
    assert listed == [f"model.ckpt-{step}" for step in range(1, SAVED_STEPS + 2)]


def test_files_of_an_interrupted_save_are_ignored_without_a_warning(saved_run, tmp_path):
    """A kill after the data and .meta of step 4 were moved in, before its index: step 3 resumes silently."""
    def interrupted_save(train_dir):
        for suffix in (".data-00000-of-00001", ".meta"):
            source = os.path.join(train_dir, f"model.ckpt-3{suffix}")
            shutil.copy(source, os.path.join(train_dir, f"model.ckpt-4{suffix}"))

    train_dir = damaged_copy(saved_run, tmp_path, interrupted_save)
    process = check_ok(resume(train_dir))
    assert int(progress_lines(process.stdout)[0]["step"]) == SAVED_STEPS + 1
    assert warnings_of(process.stderr) == []
    assert checkpoint_tensor(train_dir, "global_step") == SAVED_STEPS + 1


def test_evaluating_a_folder_with_a_damaged_newest_checkpoint_uses_the_previous_one(saved_run, tmp_path):
    train_dir = damaged_copy(saved_run, tmp_path, truncate(DATA, 1000))
    process = check_ok(run_script(
        EVAL_SCRIPT, f"--checkpoint_path={train_dir}", f"--eval_dir={tmp_path / 'eval'}",
        "--dataset_name=fashion_mnist", "--model_name=lenet", "--max_num_batches=1",
    ))
    warning = warnings_of(process.stderr)
    assert len(warning) == 1 and DATA in warning[0] and "using model.ckpt-2" in warning[0], warning
    assert f"--checkpoint_path={train_dir}: skipped damaged checkpoint(s): " in warning[0]
    assert "global_step=2" in process.stdout


@pytest.mark.parametrize("content", ['["float16"]', '{"precision": 16}', "{not json"])
def test_a_damaged_run_record_is_a_warning_not_an_error(tmp_path, content, caplog):
    """run_info.json only feeds the warning about a precision change: damage makes the precision unknown."""
    (tmp_path / RUN_INFO_FILENAME).write_text(content)
    with caplog.at_level(logging.WARNING):
        assert _recorded_precision(str(tmp_path)) is None
    assert any(str(tmp_path / RUN_INFO_FILENAME) in record.getMessage() for record in caplog.records)
