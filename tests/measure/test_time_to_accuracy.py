"""Time to accuracy: the side-by-side script on a tiny LeNet run, a lane against the plain training loop, the table."""

import json
import os
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
from matplotlib import image as mpimg

from script_runs import REPO_ROOT, check_bad_input, check_ok, run_script
from slim_mp.datasets import get_dataset
from slim_mp.measure.parity.run_configs import run_train_config
from slim_mp.measure.parity.time_to_accuracy import (EvalPoint, LaneRecord, TimeToAccuracyConfig,
                                                     TimeToAccuracyResult, run_time_to_accuracy)
from slim_mp.measure.parity.time_to_accuracy_report import first_reaching, target_accuracy, time_to_accuracy_markdown
from slim_mp.training import train

SCRIPT = os.path.join(REPO_ROOT, "scripts", "time_to_accuracy.py")
STEPS, CHUNK, EVAL_EVERY, BATCH = 8, 2, 4, 8
PAUSE_SECONDS = 3.0  # far longer than LeNet's two steps
WEIGHTS_RTOL = 1e-5  # the same float32 computation in another process; only the summation order may differ


@pytest.fixture(scope="module")
def script_run(tmp_path_factory):
    """Run the script once on LeNet; return its output folder and the parsed JSON record."""
    output_dir = tmp_path_factory.mktemp("tta")
    check_ok(run_script(SCRIPT, "--model_name=lenet", f"--steps={STEPS}", f"--chunk_steps={CHUNK}",
                        f"--eval_every_n_steps={EVAL_EVERY}", f"--batch_size={BATCH}", f"--output_dir={output_dir}",
                        "--placement=static"))
    with open(output_dir / "time_to_accuracy.json", encoding="utf-8") as handle:
        return output_dir, json.load(handle)


def test_both_lanes_are_evaluated_every_n_steps_on_their_own_clock(script_run):
    output_dir, record = script_run
    assert set(record["lanes"]) == {"float32", "bfloat16"} and record["eval_split"] == "test"
    for lane in record["lanes"].values():
        assert [point["step"] for point in lane["points"]] == [EVAL_EVERY, STEPS]
        seconds = [point["train_seconds"] for point in lane["points"]]
        assert 0 < seconds[0] < seconds[1]
        assert all(0 <= point["accuracy"] <= 1 for point in lane["points"])
    assert record["lanes"]["bfloat16"]["low_allow_ops"] == record["lanes"]["bfloat16"]["allow_ops"] == 4  # static
    assert record["lanes"]["float32"]["low_allow_ops"] is None
    assert record["target_accuracy"] == pytest.approx(record["lanes"]["float32"]["points"][-1]["accuracy"] - 0.005)
    markdown = (output_dir / "time_to_accuracy.md").read_text(encoding="utf-8")
    assert "| float32 |" in markdown and "| bfloat16 |" in markdown and record["device"] in markdown
    assert min(mpimg.imread(str(output_dir / "time_to_accuracy.png")).shape[:2]) > 100


def test_a_lane_trains_exactly_as_the_training_loop_does(script_run, tmp_path):
    # Taking turns must not change a lane: the float32 lane's weights equal a plain run of the same steps.
    output_dir, _ = script_run
    config = TimeToAccuracyConfig(model_name="lenet", steps=STEPS, batch_size=BATCH, output_dir=str(output_dir))
    initial = tf.train.latest_checkpoint(str(output_dir / "initial"))
    plain = train(run_train_config(config, get_dataset("fashion_mnist", "train"), 0, "float32", str(tmp_path),
                                   STEPS, initial), print_line=lambda line: None)
    lane = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(output_dir / "float32")))
    reference = tf.train.load_checkpoint(plain.checkpoint)
    assert lane.get_tensor("global_step") == reference.get_tensor("global_step") == STEPS
    for name in ("LeNet/conv1/weights", "LeNet/fc4/weights", "LeNet/fc4/biases"):
        np.testing.assert_allclose(lane.get_tensor(name), reference.get_tensor(name), rtol=WEIGHTS_RTOL, atol=1e-7)
    assert not np.allclose(lane.get_tensor("LeNet/conv1/weights"),
                           tf.train.load_checkpoint(initial).get_tensor("LeNet/conv1/weights")), "it trained"


def _lane(precision: str, points) -> LaneRecord:
    return LaneRecord(precision, 3.0, tuple(EvalPoint(step, seconds, accuracy, 0.4)
                                            for step, seconds, accuracy in points), None, None)


def test_the_table_gives_when_each_precision_came_within_the_margin(tmp_path):
    config = TimeToAccuracyConfig(model_name="lenet", steps=300, output_dir=str(tmp_path))
    lanes = {"float32": _lane("float32", [(100, 100.0, 0.80), (200, 200.0, 0.85), (300, 300.0, 0.86)]),
             "bfloat16": _lane("bfloat16", [(100, 70.0, 0.82), (200, 140.0, 0.858), (300, 210.0, 0.861)])}
    result = TimeToAccuracyResult(config, "CPU Test", "test", lanes)
    assert target_accuracy(result) == pytest.approx(0.855)  # 0.86 less 0.5 pp
    assert first_reaching(lanes["float32"], 0.855).train_seconds == 300.0
    assert first_reaching(lanes["bfloat16"], 0.855).train_seconds == 140.0
    assert first_reaching(lanes["bfloat16"], 0.87) is None
    text = time_to_accuracy_markdown(result)
    assert "| float32 | 86.00% | 300 s (step 300) | 1.00x | 1000.0 | 300 | 3 | - |" in text
    assert "| bfloat16 | 86.10% | 140 s (step 200) | 2.14x | 700.0 | 210 | 3 | - |" in text
    slower = dict(lanes, bfloat16=_lane("bfloat16", [(100, 70.0, 0.80), (300, 210.0, 0.85)]))
    assert "| bfloat16 | 85.00% | not reached | - |" in time_to_accuracy_markdown(
        TimeToAccuracyResult(config, "CPU Test", "test", slower))


@pytest.mark.parametrize("flags, expected", [
    (("--chunk_steps=20", "--eval_every_n_steps=30"), "error: --eval_every_n_steps=30 is not a multiple of "
                                                      "--chunk_steps=20"),
    (("--chunk_steps=0",), "error: --chunk_steps=0 must be a positive number"),
    (("--seed=-1",), "error: --seed=-1 must be a non-negative integer"),
    (("--model_name=cifarnet", "--batch_norm_decay=0.9"), "error: --batch_norm_decay=0.9: network cifarnet has no"),
])
def test_bad_input_is_one_error_line_and_exit_status_2(tmp_path, flags, expected):
    check_bad_input(run_script(SCRIPT, "--model_name=lenet", "--steps=2", f"--output_dir={tmp_path}", *flags),
                    expected)
    assert os.listdir(tmp_path) == []


def test_an_output_dir_holding_an_earlier_run_is_refused(tmp_path):
    (tmp_path / "float32").mkdir()
    check_bad_input(run_script(SCRIPT, "--model_name=lenet", "--steps=2", f"--output_dir={tmp_path}"),
                    f"error: --output_dir={tmp_path} is not empty")


def test_a_pause_file_holds_the_turns_off_the_clocks(tmp_path):
    # Another job's quiet period: the run waits while the file exists, and no lane's clock counts the wait.
    pause = tmp_path / "QUIET"
    pause.touch()
    remover = threading.Timer(PAUSE_SECONDS, pause.unlink)
    config = TimeToAccuracyConfig(model_name="lenet", steps=2, chunk_steps=1, eval_every_n_steps=2, batch_size=4,
                                  output_dir=str(tmp_path / "run"), pause_file=str(pause))
    started = time.monotonic()
    remover.start()
    result = run_time_to_accuracy(config, print_line=lambda line: None)
    assert time.monotonic() - started >= PAUSE_SECONDS
    assert all(lane.points[-1].train_seconds < PAUSE_SECONDS for lane in result.lanes.values())
