"""scripts/make_overflow_checkpoint.py and the README example built on it: float32 unaffected, float16 overflows."""

import os

import pytest

from script_runs import REPO_ROOT, TRAIN_SCRIPT, check_bad_input, check_ok, progress_lines, run_script

MAKE_SCRIPT = os.path.join(REPO_ROOT, "scripts", "make_overflow_checkpoint.py")
EXAMPLE_ARGS = ("--dataset_name=fashion_mnist", "--model_name=resnet_v1_18", "--preprocessing_name=cifarnet",
                "--train_image_size=32", "--batch_size=8", "--seed=0", "--optimizer=momentum",
                "--learning_rate=0.01", "--weight_decay=0", "--max_number_of_steps=1", "--log_every_n_steps=1")
# Batch norm divides conv1's 10^4-times larger output by its 10^4-times larger batch deviation; only
# its epsilon (added to a 10^8-times larger variance) and rounding differ.
FLOAT32_LOSS_RTOL = 1e-3


def first_loss(train_dir: str, checkpoint: str, precision: str) -> float:
    process = check_ok(run_script(TRAIN_SCRIPT, *EXAMPLE_ARGS, f"--train_dir={train_dir}",
                                  f"--checkpoint_path={checkpoint}", f"--precision={precision}"))
    return float(progress_lines(process.stdout)[0]["loss"])


@pytest.mark.slow
def test_the_scaled_checkpoint_trains_in_float32_as_the_original_and_overflows_float16(tmp_path):
    original, scaled = str(tmp_path / "r18_float32"), str(tmp_path / "r18_big")
    check_ok(run_script(MAKE_SCRIPT, "--steps=2", f"--train_dir={original}", f"--output_dir={scaled}"))
    reference = first_loss(str(tmp_path / "from_original"), original, "float32")
    assert first_loss(str(tmp_path / "from_scaled"), scaled, "float32") == pytest.approx(reference,
                                                                                         rel=FLOAT32_LOSS_RTOL)
    process = run_script(TRAIN_SCRIPT, *EXAMPLE_ARGS, f"--train_dir={tmp_path / 'float16'}",
                         f"--checkpoint_path={scaled}", "--precision=float16", "--mp_debug_nonfinite")
    assert process.returncode != 0
    assert "first non-finite value came from op 'resnet_v1_18/conv1/Conv2D_fp16'" in process.stderr


@pytest.mark.parametrize("steps, expected", [(0, "error: --steps=0"), (5, "error: --output_dir=")])
def test_bad_flags_are_one_error_line_before_any_training(tmp_path, steps, expected):
    (tmp_path / "r18_big").mkdir()
    check_bad_input(run_script(MAKE_SCRIPT, f"--steps={steps}", f"--train_dir={tmp_path / 'r18_float32'}",
                               f"--output_dir={tmp_path / 'r18_big'}"), expected)
    assert not (tmp_path / "r18_float32").exists()
