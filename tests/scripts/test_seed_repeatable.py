"""``--seed``: the same training command run twice prints the same losses at every step and saves the same weights.

Default input flags (four preprocessing threads), the measured placement (the suite's fixed
timings put every allow op in bfloat16), float32 and bfloat16. The cifarnet preprocessing draws
random crops, flips and colour changes: before the preprocessing ran serially under a seed, two
such runs differed from the first step on.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from script_runs import TRAIN_SCRIPT, check_ok, progress_lines, run_script

LENET = ("--dataset_name=fashion_mnist", "--model_name=lenet", "--batch_size=16")
RESNET_32PX = ("--dataset_name=fashion_mnist", "--model_name=resnet_v1_18", "--preprocessing_name=cifarnet",
               "--train_image_size=32", "--batch_size=8")


def train_twice(base_dir: str, *args: str) -> tuple:
    """Run the same seeded command into two fresh train dirs; return both runs' (progress lines, weights)."""
    runs = []
    for name in ("first", "second"):
        train_dir = os.path.join(base_dir, name)
        process = check_ok(run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", "--seed=0", "--log_every_n_steps=1",
                                      *args))
        lines = [{key: value for key, value in line.items() if key != "images_per_second"}
                 for line in progress_lines(process.stdout)]
        reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
        weights = {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
        runs.append((lines, weights))
    return tuple(runs)


def assert_same_run(first: tuple, second: tuple, steps: int) -> None:
    (lines, weights), (lines_again, weights_again) = first, second
    assert [int(line["step"]) for line in lines] == list(range(1, steps + 1))
    assert lines == lines_again
    assert weights.keys() == weights_again.keys()
    differing = [name for name in weights if not np.array_equal(weights[name], weights_again[name])]
    assert not differing, differing


# float32 is also the precision of the distorted-input run below, so by default LeNet repeats in bfloat16.
@pytest.mark.parametrize("precision", [pytest.param("float32", marks=pytest.mark.slow), "bfloat16"])
def test_lenet_with_a_seed_repeats_every_loss_and_weight(tmp_path, precision):
    first, second = train_twice(str(tmp_path), *LENET, f"--precision={precision}", "--max_number_of_steps=4")
    assert_same_run(first, second, steps=4)


def test_randomly_distorted_input_with_a_seed_repeats_every_loss_and_weight(tmp_path):
    """LeNet (cheap) under the cifarnet training preprocessing's random distortions."""
    first, second = train_twice(str(tmp_path), *LENET, "--preprocessing_name=cifarnet", "--max_number_of_steps=4")
    assert_same_run(first, second, steps=4)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_resnet_v1_18_with_a_seed_repeats_every_loss_and_weight(tmp_path, precision):
    first, second = train_twice(str(tmp_path), *RESNET_32PX, f"--precision={precision}", "--max_number_of_steps=3")
    assert_same_run(first, second, steps=3)
