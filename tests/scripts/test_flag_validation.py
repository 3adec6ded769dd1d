"""Flags the training script used to accept (or blame on another flag): one error line naming the flag typed."""

import pytest
import tensorflow as tf

from script_runs import LENET_ARGS, TRAIN_SCRIPT, check_bad_input, check_ok, run_script
from slim_mp.loss_scale.divergence import TrainingDivergedError, read_divergence
from slim_mp.loss_scale.skip_monitor import divergence_guard

# Each case: extra flags, the start of the error line, a fragment naming the fix.
REFUSED = {
    "zero steps": (["--max_number_of_steps=0"], "error: --max_number_of_steps=0 would save an untrained model",
                   "pass a positive step count"),
    "loss scale in float32": (["--loss_scale=abc"], "error: --loss_scale=abc is neither 'dynamic' nor a number",
                              "--loss_scale=128"),
    "negative learning rate": (["--learning_rate=-0.1"], "error: --learning_rate=-0.1 must be a number >= 0",
                               "--learning_rate=0.01"),
    "nan learning rate": (["--learning_rate=nan"], "error: --learning_rate=nan must be a number >= 0",
                          "--learning_rate=0.01"),
    "negative weight decay": (["--weight_decay=-1"], "error: --weight_decay=-1.0 must be a number >= 0",
                              "--weight_decay=4e-05"),
    "negative save interval": (["--save_interval_secs=-5"], "error: --save_interval_secs=-5 must be a number >= 0",
                               "--save_interval_secs=600"),
    "negative max_to_keep": (["--max_to_keep=-1"], "error: --max_to_keep=-1 is negative",
                             "0 to keep every one"),
    "adam beta1 of 1": (["--optimizer=adam", "--adam_beta1=1.0"], "error: --adam_beta1=1.0 must lie in [0, 1)",
                        "--adam_beta1=0.9"),
    "negative adam beta2": (["--adam_beta2=-0.5"], "error: --adam_beta2=-0.5 must lie in [0, 1)", "--adam_beta2"),
    "negative image size": (["--train_image_size=-3"], "error: --train_image_size=-3 must be a positive integer",
                            "--train_image_size=224"),
    "unknown deny op": (["--precision=bfloat16", "--mp_deny_ops=Softmaxx"],
                        "error: --mp_deny_ops=Softmaxx: Unknown TensorFlow op type 'Softmaxx'", "'Softmax'"),
    "exclude scope naming nothing": (["--checkpoint_path=/nonexistent", "--checkpoint_exclude_scopes=LeNet/fc9"],
                                     "error: --checkpoint_exclude_scopes names LeNet/fc9, which match(es) no model "
                                     "variable", "LeNet"),
    "labels offset past the classes": (["--labels_offset=10"], "error: the dataset leaves 0 classes after "
                                       "--labels_offset", "lower --labels_offset"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_bad_flag_is_one_error_line_naming_it(case, tmp_path):
    flags, start, fix = REFUSED[case]
    process = run_script(TRAIN_SCRIPT, f"--train_dir={tmp_path / 'run'}", "--max_number_of_steps=1", *LENET_ARGS,
                         *flags)
    assert process.returncode == 2, process.stderr[-2000:]
    assert "Traceback" not in process.stderr
    last = process.stderr.strip().splitlines()[-1]
    assert last.startswith(start) and fix in last, last
    assert not (tmp_path / "run").exists() or not any(
        path.name.startswith("model.ckpt") for path in (tmp_path / "run").iterdir()
    )


def test_a_labels_offset_that_makes_labels_negative_is_named(tmp_path):
    """Fashion-MNIST's labels are 0..9: an offset of 5 would train on labels -5..4 (all-zero one-hot rows)."""
    process = run_script(TRAIN_SCRIPT, f"--train_dir={tmp_path / 'run'}", "--max_number_of_steps=2", *LENET_ARGS,
                         "--labels_offset=5")
    assert process.returncode == 2, process.stderr[-2000:]
    assert "Traceback" not in process.stderr
    last = process.stderr.strip().splitlines()[-1]
    assert last.startswith("error: --labels_offset=5 makes label ") and "of the data negative" in last, last


def test_adam_at_the_rmsprop_epsilon_gets_a_one_line_hint(tmp_path):
    hinted = check_ok(run_script(TRAIN_SCRIPT, f"--train_dir={tmp_path / 'default'}", "--max_number_of_steps=1",
                                 *LENET_ARGS, "--optimizer=adam"))
    hints = [line for line in hinted.stderr.splitlines() if "--opt_epsilon" in line]
    assert len(hints) == 1 and "--opt_epsilon=1e-8" in hints[0]
    tuned = check_ok(run_script(TRAIN_SCRIPT, f"--train_dir={tmp_path / 'tuned'}", "--max_number_of_steps=1",
                                *LENET_ARGS, "--optimizer=adam", "--opt_epsilon=1e-8"))
    assert "--opt_epsilon" not in tuned.stderr


DIVERGING = {
    "float32": (["--learning_rate=1e6"], ""),
    "bfloat16": (["--learning_rate=1e6", "--precision=bfloat16"], " with loss scale 1"),
}


@pytest.mark.parametrize("precision", sorted(DIVERGING))
def test_divergence_is_one_error_line_with_the_step_and_loss_scale(precision, tmp_path):
    flags, scale = DIVERGING[precision]
    process = run_script(TRAIN_SCRIPT, f"--train_dir={tmp_path / 'run'}", "--max_number_of_steps=20",
                         "--log_every_n_steps=1", *LENET_ARGS, *flags)
    assert process.returncode == 2, process.stderr[-2000:]
    assert "Traceback" not in process.stderr
    last = process.stderr.strip().splitlines()[-1]
    steps_done = len([line for line in process.stdout.splitlines() if line.startswith("step=")])
    assert last == (f"error: The loss is inf or NaN; lower --learning_rate or check the input data "
                    f"(at step {steps_done + 1}{scale})."), last


def test_the_loss_scale_guard_becomes_one_line_with_the_step():
    """The float16 guard's real error (limit 1, one non-finite gradient) as the loop reports it."""
    with tf.Graph().as_default():
        weight = tf.compat.v1.Variable(1.0, name="weight")
        guard = divergence_guard(tf.constant(1), 1, [(tf.constant(float("nan")), weight)],
                                 tf.constant([False]), tf.constant(1.0))
        with tf.compat.v1.Session() as session:
            with pytest.raises(tf.errors.InvalidArgumentError) as raised:
                session.run(guard)
            error = TrainingDivergedError(read_divergence(raised.value), 7, None)
    assert isinstance(error, TrainingDivergedError) and isinstance(error, ValueError)
    assert str(error) == (
        "Training diverged: 1 steps in a row were skipped with the loss scale at its minimum (1), because the "
        "gradients of 1 variable(s) hold inf or NaN even unscaled, first: weight. Run these layers in bfloat16, or "
        "add the ops that feed them to the float16 deny list (at step 7)."
    )


# A program run as every script runs its main (slim_mp.training.cli.run): a library log line and a library error
# naming arguments (one whose flag has another name).
LIBRARY_NAMES = """
from absl import logging
from slim_mp.config_fields import ArgumentError, ArgumentText, argument
from slim_mp.training import cli


def main():
    logging.warning("%s", ArgumentText(f"{argument('train_dir')}=runs/a: taking over the lock"))
    raise ArgumentError(f"{argument('debug_nonfinite', reads='debug_nonfinite=True')} needs float16")


cli.run(main)
"""


def test_the_runner_names_the_scripts_flags_in_library_log_lines_and_errors(tmp_path):
    program = tmp_path / "library_names.py"
    program.write_text(LIBRARY_NAMES)
    process = run_script(str(program))
    check_bad_input(process, "error: --mp_debug_nonfinite needs float16")
    assert any(line.endswith("--train_dir=runs/a: taking over the lock") for line in process.stderr.splitlines())
