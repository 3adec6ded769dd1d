"""A user's loop keeps its train dir as our script does: the lock, a damaged checkpoint named, the damage set aside.

The checkpoints are written by a plain ``tf.compat.v1.train.Saver`` (what slim's Supervisor and the
``CheckpointSaverHook`` use); ``MonitoredTrainingSession`` runs in-process with ``TrainStepHook``.
"""

import os
import subprocess
import sys

import pytest
import tensorflow as tf

import slim_mp
import tiny_model
from slim_mp.seams.error_lines import one_line
from slim_mp.seams.official_loops import OfficialLoop
from slim_mp.seams.train_dir_guard import damaged_checkpoint_error
from slim_mp.train_dir import find_resume_checkpoint
from slim_mp.train_dir.checkpoint_state import write_state
from slim_mp.train_dir.folder_lock import LOCK_FILENAME, TrainDirInUseError

tf1 = tf.compat.v1


def _checkpoints(train_dir: str, steps=(0, 5, 10)) -> None:
    """``model.ckpt-<step>`` of one variable for each step, listed in the state file as a Saver lists them."""
    with tf.Graph().as_default():
        variable = tf1.Variable(1.0, name="weight")
        saver = tf1.train.Saver(max_to_keep=10)
        with tf1.Session() as session:
            session.run(variable.initializer)
            for step in steps:
                saver.save(session, os.path.join(train_dir, "model.ckpt"), global_step=step)


def _truncate(train_dir: str, prefix: str) -> str:
    (data_file,) = [name for name in os.listdir(train_dir) if name.startswith(prefix + ".data-")]
    os.truncate(os.path.join(train_dir, data_file), 3)
    return data_file


def test_setting_aside_moves_the_damaged_newest_and_names_the_intact_one_in_the_state_file(tmp_path):
    _checkpoints(str(tmp_path))
    _truncate(str(tmp_path), "model.ckpt-10")
    assert slim_mp.set_aside_damaged_checkpoints(str(tmp_path)) == ("model.ckpt-10",)
    assert sorted(os.listdir(tmp_path / "damaged")) == [
        "model.ckpt-10.data-00000-of-00001", "model.ckpt-10.index", "model.ckpt-10.meta"]
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert os.path.basename(state.model_checkpoint_path) == "model.ckpt-5"
    assert [os.path.basename(path) for path in state.all_model_checkpoint_paths] == ["model.ckpt-0", "model.ckpt-5"]
    assert slim_mp.set_aside_damaged_checkpoints(str(tmp_path)) == ()  # nothing left to move


def test_with_no_intact_checkpoint_left_the_state_file_goes_and_a_loop_starts_over(tmp_path):
    _checkpoints(str(tmp_path), steps=(3,))
    _truncate(str(tmp_path), "model.ckpt-3")
    assert slim_mp.set_aside_damaged_checkpoints(str(tmp_path)) == ("model.ckpt-3",)
    assert tf.train.get_checkpoint_state(str(tmp_path)) is None


def _state_garbage(train_dir: str) -> None:
    with open(os.path.join(train_dir, "checkpoint"), "w", encoding="utf-8") as handle:
        handle.write("garbage {")


def _newest_unlisted(train_dir: str) -> None:
    """Killed after model.ckpt-10's index was written, before the state file named it."""
    write_state(train_dir, ["model.ckpt-0", "model.ckpt-5"])


def _interrupted_newer_save(train_dir: str) -> None:
    """Killed while writing model.ckpt-15: a data file, no index, not listed."""
    with open(os.path.join(train_dir, "model.ckpt-15.data-00000-of-00001"), "wb") as handle:
        handle.write(b"partial")


# (how the folder of checkpoints 0, 5 and 10 is damaged, the checkpoint a resume must take)
FOLDERS = {
    "newest truncated": (lambda train_dir: _truncate(train_dir, "model.ckpt-10"), "model.ckpt-5"),
    "two newest truncated": (
        lambda train_dir: [_truncate(train_dir, prefix) for prefix in ("model.ckpt-10", "model.ckpt-5")],
        "model.ckpt-0"),
    "state file damaged": (_state_garbage, "model.ckpt-10"),
    "newest not yet listed": (_newest_unlisted, "model.ckpt-10"),
    "newest truncated, not yet listed": (
        lambda train_dir: (_newest_unlisted(train_dir), _truncate(train_dir, "model.ckpt-10")), "model.ckpt-5"),
    "an interrupted newer save": (_interrupted_newer_save, "model.ckpt-10"),
}


@pytest.mark.parametrize("case", sorted(FOLDERS))
def test_our_resume_and_a_users_loop_take_the_same_checkpoint_of_the_same_folder(case, tmp_path):
    """One survey for both: our loop's resume pick, and the state file a user's loop restores from once the seam's
    error said what to do (``set_aside_damaged_checkpoints``), name the same checkpoint."""
    damage, expected = FOLDERS[case]
    ours, users = str(tmp_path / "ours"), str(tmp_path / "users")
    for train_dir in (ours, users):  # built alike (a copy would keep the absolute paths a Saver writes)
        os.mkdir(train_dir)
        _checkpoints(train_dir)
        damage(train_dir)

    assert find_resume_checkpoint(ours) == os.path.join(ours, expected)
    error = damaged_checkpoint_error(OfficialLoop("slim.learning.train", "logdir", users, True))
    assert error is None or f"; {expected} is intact: call slim_mp.set_aside_damaged_checkpoints" in str(error)
    slim_mp.set_aside_damaged_checkpoints(users)
    assert tf.train.latest_checkpoint(users) == os.path.join(users, expected)
    assert tf.train.latest_checkpoint(ours) == os.path.join(ours, expected)


def test_monitored_training_session_on_a_damaged_checkpoint_reads_as_one_sentence_with_the_way_forward(tmp_path):
    with tf.Graph().as_default():
        train_op, _ = tiny_model.build(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
        with tf1.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_summaries_secs=None) as session:
            session.run(train_op)
    latest = os.path.basename(tf.train.latest_checkpoint(str(tmp_path)))  # model.ckpt-0 is saved at the start
    data_file = _truncate(str(tmp_path), latest)
    with tf.Graph().as_default():
        train_op, _ = tiny_model.build(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
        with pytest.raises(tf.errors.OpError) as raised:
            tf1.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_summaries_secs=None,
                                               hooks=[slim_mp.TrainStepHook(train_op)])
    assert one_line(raised.value, raised.tb) == (
        f"MonitoredTrainingSession cannot restore the latest checkpoint of checkpoint_dir={tmp_path}: {data_file} is "
        f"damaged or truncated; model.ckpt-0 is intact: call slim_mp.set_aside_damaged_checkpoints({str(tmp_path)!r}) "
        "to move the damaged one(s) into damaged/, then run the same command again to resume from model.ckpt-0.")


def test_the_hook_refuses_a_train_dir_another_process_holds(tmp_path):
    holder = os.open(os.path.join(tmp_path, LOCK_FILENAME), os.O_RDWR | os.O_CREAT)
    # Another process holding the lock: a child that flocks the file, names itself in it, and waits.
    hold = (f"import fcntl, os, sys; fcntl.flock({holder}, fcntl.LOCK_EX); os.write({holder}, b'4242 elsewhere'); "
            "print('held', flush=True); sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", hold], pass_fds=(holder,), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        with tf.Graph().as_default():
            train_op, _ = tiny_model.build(learning_rate=0.01, loss_scale=128.0, debug_nonfinite=False)
            with pytest.raises(TrainDirInUseError) as raised:
                tf1.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path),
                                                   hooks=[slim_mp.TrainStepHook(train_op)])
        assert str(raised.value) == (
            f"checkpoint_dir={tmp_path} is in use by another training process (pid 4242 on host elsewhere); wait for "
            "it to finish, stop it, or pass another checkpoint_dir.")
        assert not [name for name in os.listdir(tmp_path) if name.startswith("model.ckpt")]  # refused before any save
    finally:
        child.stdin.close()
        child.wait(timeout=30)
        os.close(holder)
