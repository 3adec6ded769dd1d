"""scripts/parity.py as a user runs it: LeNet on the bundled Fashion-MNIST, float32 vs bfloat16 and the control."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from matplotlib import image as mpimg

from script_runs import REPO_ROOT, check_bad_input, check_ok, run_script
from slim_mp.measure.parity.parity_results import StepLog

PARITY_SCRIPT = os.path.join(REPO_ROOT, "scripts", "parity.py")
STEPS = 8
LOG_EVERY = 4
SEEDS = (0, 1)
ARMS = ("float32", "bfloat16", "float32_perturbed")
SUMMARY_RTOL = 1e-9  # mean/std recomputed in float64 from the same per-seed values
FIRST_LOSS_RTOL = 0.02  # bfloat16's 8-bit mantissa against the float32 reference, same weights and batch


@pytest.fixture(scope="module")
def parity_run(tmp_path_factory):
    """Run the script once; return its output folder, the parsed parity.json and its stdout."""
    output_dir = str(tmp_path_factory.mktemp("parity"))
    process = check_ok(run_script(
        PARITY_SCRIPT, "--model_name=lenet", "--dataset_name=fashion_mnist", "--precision=bfloat16",
        f"--steps={STEPS}", f"--seeds={','.join(map(str, SEEDS))}", f"--output_dir={output_dir}",
        "--batch_size=8", "--learning_rate=0.01", f"--log_every_n_steps={LOG_EVERY}",
    ))
    with open(os.path.join(output_dir, "parity.json"), encoding="utf-8") as handle:
        return output_dir, json.load(handle), process.stdout


def runs_by_key(record: dict) -> dict:
    return {(run["arm"], run["seed"]): run for run in record["runs"]}


def test_writes_json_markdown_and_a_png_with_every_arm_and_seed(parity_run):
    output_dir, record, stdout = parity_run
    assert set(runs_by_key(record)) == {(arm, seed) for arm in ARMS for seed in SEEDS}
    assert len(record["runs"]) == len(ARMS) * len(SEEDS)
    assert record["arms"] == list(ARMS) and set(record["summary"]) == set(ARMS)
    with open(os.path.join(output_dir, "parity.md"), encoding="utf-8") as handle:
        markdown = handle.read()
    for arm in ARMS:
        assert f"| {arm} |" in markdown
    assert "loss_curves.png" in markdown
    picture = mpimg.imread(os.path.join(output_dir, "loss_curves.png"))
    assert picture.ndim == 3 and min(picture.shape[:2]) > 100
    assert f"float32 seed 0: step={LOG_EVERY} " in stdout and f"bfloat16 seed 1: step={STEPS} " in stdout  # progress


def test_the_default_placement_is_measured_and_each_mixed_run_counts_its_low_ops(parity_run):
    output_dir, record, _ = parity_run
    assert record["config"]["placement"] is None
    for (arm, seed), run in runs_by_key(record).items():
        train_dir = os.path.join(output_dir, f"seed_{seed}", arm)
        if run["precision"] == "float32":
            assert run["low_allow_ops"] is None and run["allow_ops"] is None
            continue
        # LeNet's forward graph has 4 conv/matmul-class ops (conv1, conv2, fc3, logits).
        assert run["allow_ops"] == 4 and 0 <= run["low_allow_ops"] <= 4
        assert os.path.exists(os.path.join(train_dir, "placement.json")), "the measured placement decided here"


def test_every_run_records_one_loss_point_per_step(parity_run):
    _, record, _ = parity_run
    for run in record["runs"]:
        curves = run["curves"]
        assert curves["step"] == list(range(1, STEPS + 1))
        assert len(curves["loss"]) == len(curves["loss_scale"]) == len(curves["skipped"]) == STEPS
        assert all(np.isfinite(curves["loss"]))
        assert run["final_loss"] == curves["loss"][-1]
        assert set(curves["loss_scale"]) == {1.0} and run["skipped_steps"] == 0  # bfloat16 needs no scaling


def test_summary_is_mean_and_sample_std_of_the_per_seed_values(parity_run):
    output_dir, record, _ = parity_run
    runs = runs_by_key(record)
    for arm in ARMS:
        for metric in ("accuracy", "final_loss", "eval_loss"):
            values = np.array([runs[arm, seed][metric] for seed in SEEDS], dtype=np.float64)
            reported = record["summary"][arm][metric]
            assert reported["mean"] == pytest.approx(values.mean(), rel=SUMMARY_RTOL)
            assert reported["std"] == pytest.approx(values.std(ddof=1), rel=SUMMARY_RTOL)
        for seed in SEEDS:  # accuracy as the evaluation wrote it
            with open(os.path.join(output_dir, f"seed_{seed}", arm, "eval", "metrics.json")) as handle:
                assert runs[arm, seed]["accuracy"] == json.load(handle)["accuracy"]
    for arm in ARMS[1:]:  # paired gaps in percentage points
        points = 100 * np.array([runs[arm, seed]["accuracy"] - runs["float32", seed]["accuracy"] for seed in SEEDS])
        gap = record["gaps_points"][arm]
        assert gap["n"] == len(SEEDS) and gap["margin"] == 0.5
        assert gap["mean"] == pytest.approx(points.mean(), rel=SUMMARY_RTOL, abs=1e-12)
        assert gap["std"] == pytest.approx(points.std(ddof=1), rel=SUMMARY_RTOL, abs=1e-12)


def test_both_precisions_of_a_seed_start_from_one_float32_checkpoint(parity_run):
    _, record, _ = parity_run
    runs = runs_by_key(record)
    initial_weights = []
    for seed in SEEDS:
        checkpoint = runs["float32", seed]["initial_checkpoint"]
        assert runs["bfloat16", seed]["initial_checkpoint"] == checkpoint
        reader = tf.train.load_checkpoint(checkpoint)
        assert reader.get_tensor("global_step") == 0
        initial_weights.append(reader.get_tensor("LeNet/conv1/weights"))
        assert initial_weights[-1].dtype == np.float32
        # Same weights, same first batch: the first losses differ only by bfloat16 rounding.
        reference = runs["float32", seed]["curves"]["loss"][0]
        assert runs["bfloat16", seed]["curves"]["loss"][0] == pytest.approx(reference, rel=FIRST_LOSS_RTOL)
    assert not np.array_equal(*initial_weights)


@pytest.mark.parametrize("flag, expected", [
    ("--model_name=no_such_net", "error: --model_name='no_such_net' is not a known network"),
    ("--precision=float32", "error: --precision='float32': 'float32' is not a mixed precision"),
    ("--seeds=1,1", "error: --seeds=1,1 must be distinct"),
    ("--seeds=0,x", "error: --seeds=0,x holds an item that is not int"),
    ("--batch_size=many", "error: flag --batch_size=many: invalid literal"),
    ("--placement=fast", "error: --placement='fast': "),
    ("--equivalence_margin=0", "error: --equivalence_margin=0.0 must be a positive number"),
    ("--batch_norm_decay=0.99", "error: --batch_norm_decay=0.99: network lenet has no batch norm"),
    ("--model_name=mobilenet_v1 --batch_norm_decay=1", "error: --batch_norm_decay=1.0 must lie between 0 and 1"),
])
def test_bad_input_is_one_error_line_and_exit_status_2(flag, expected, tmp_path):
    process = run_script(PARITY_SCRIPT, "--steps=2", f"--output_dir={tmp_path}", *flag.split())
    check_bad_input(process, expected)
    assert os.listdir(tmp_path) == []


def test_step_log_keeps_one_applied_step_per_global_step_when_float16_skips():
    log = StepLog()
    for step, loss, skipped in [(0, 9.0, 1), (0, 8.0, 2), (1, 7.0, 2), (1, 6.0, 3), (2, 5.0, 3)]:
        log.record({"step": step, "loss": loss, "loss_scale": 4.0, "skipped": skipped, "learning_rate": 0.1})
    assert log.applied() == ([1, 2], [7.0, 5.0])
