"""Parity's placement option, its count of lowered conv/matmul-class ops and its control arm, on a tiny LeNet run."""

import dataclasses
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from slim_mp.measure.parity.parity_config import CONTROL_PERTURBATION, ParityConfig
from slim_mp.measure.parity.parity_report import ParityReport, gaps
from slim_mp.measure.parity.parity_run import run_parity
from slim_mp.measure.parity.run_configs import lowered_allow_ops

# LeNet's conv/matmul-class ops, counted from nets/lenet.py: conv1, conv2 (Conv2D), fc3, logits (MatMul).
# Training rewrites the forward graph (the gradients follow its dtypes), so these are all the pass sees.
LENET_ALLOW_OPS = 4


@pytest.fixture(scope="module")
def static_run(tmp_path_factory):
    """One seed, one step, bfloat16 with the static placement (every allow op low), and the control."""
    config = ParityConfig(model_name="lenet", precision="bfloat16", steps=1, seeds=(0,), batch_size=4,
                          log_every_n_steps=1, placement="static",
                          output_dir=str(tmp_path_factory.mktemp("parity_static")))
    return run_parity(config, print_line=lambda line: None)


def test_the_static_placement_lowers_every_conv_and_matmul_op(static_run):
    float32, bfloat16, control = static_run.runs
    assert (control.arm, control.precision, control.low_allow_ops) == ("float32_perturbed", "float32", None)
    assert (float32.precision, float32.low_allow_ops, float32.allow_ops) == ("float32", None, None)
    assert (bfloat16.low_allow_ops, bfloat16.allow_ops) == (LENET_ALLOW_OPS, LENET_ALLOW_OPS)
    train_dir = os.path.dirname(bfloat16.checkpoint)
    # The measured placement would have written its decisions there: static was passed through.
    assert not os.path.exists(os.path.join(train_dir, "placement.json"))


def test_the_report_shows_the_count_per_mixed_run(static_run):
    report = ParityReport(static_run)
    row = next(line for line in report.to_markdown().splitlines() if line.startswith("| 0 | bfloat16 |"))
    assert f"| {LENET_ALLOW_OPS} of {LENET_ALLOW_OPS} |" in row
    assert "ran no conv/matmul-class op low" not in report.to_markdown()
    assert report.to_dict()["runs"][1]["low_allow_ops"] == LENET_ALLOW_OPS
    assert report.to_dict()["config"]["placement"] == "static"


def test_a_run_that_lowered_nothing_is_flagged(static_run):
    untouched = dataclasses.replace(static_run.runs[1], low_allow_ops=0)
    runs = [static_run.runs[0], untouched, static_run.runs[2]]
    text = ParityReport(dataclasses.replace(static_run, runs=runs)).to_markdown()
    assert "Warning: the bfloat16 run of seed(s) 0 ran no conv/matmul-class op low" in text


def test_the_control_starts_from_the_initial_weights_perturbed_by_one_part_in_a_million(static_run):
    float32, _, control = static_run.runs
    assert control.initial_checkpoint != float32.initial_checkpoint
    initial, perturbed = (tf.train.load_checkpoint(run.initial_checkpoint) for run in (float32, control))
    names = initial.get_variable_to_shape_map()
    assert perturbed.get_variable_to_shape_map() == names
    ratios = []
    for name in names:
        before, after = initial.get_tensor(name), perturbed.get_tensor(name)
        if before.dtype != np.float32:
            assert np.array_equal(before, after), name  # the global step is copied
            continue
        nonzero = before != 0
        assert np.array_equal(after[~nonzero], before[~nonzero]), name  # zeros (biases) stay zero
        ratios.append((after[nonzero] / before[nonzero]).astype(np.float64) - 1)
    ratios = np.concatenate(ratios)
    # Elementwise N(0, 1e-6), seen through float32 rounding (steps of 6e-8): over LeNet's ~3.3M weights the std is
    # within 10% of 1e-6 (one shared factor would give 0), the mean near 0, and no ratio beyond 6.5 standard
    # deviations (P = 8e-11 each).
    assert abs(ratios.std() / CONTROL_PERTURBATION - 1) < 0.1 and abs(ratios.mean()) < 0.01 * CONTROL_PERTURBATION
    assert np.abs(ratios).max() < 6.5 * CONTROL_PERTURBATION
    # One step from weights that close: the first losses agree far inside bfloat16's rounding.
    assert control.curves.loss[0] == pytest.approx(float32.curves.loss[0], rel=1e-5)


def test_the_count_sums_the_allow_class_of_every_report():
    # RewriteReport.class_counts: per class, per op type, (converted, seen).
    reports = [types.SimpleNamespace(class_counts={"allow": {"Conv2D": (1, 2), "MatMul": (3, 3)},
                                                   "infer": {"Relu": (5, 5)}}),
               types.SimpleNamespace(class_counts={"allow": {"MatMul": (0, 4)}}),
               types.SimpleNamespace(class_counts={"deny": {"Exp": (0, 1)}})]
    assert lowered_allow_ops(reports) == (4, 9)


@pytest.mark.parametrize("value", ["fast", "Static", ""])
def test_a_bad_placement_names_the_flag(value):
    with pytest.raises(ValueError, match=rf"^--placement={value!r}: .*measured.*static"):
        ParityConfig(placement=value)


def test_more_seeds_are_added_to_an_earlier_comparison_with_the_same_flags(tmp_path):
    config = ParityConfig(model_name="lenet", precision="bfloat16", steps=1, seeds=(0,), batch_size=4,
                          log_every_n_steps=1, control=False, output_dir=str(tmp_path))
    first = run_parity(config, print_line=lambda line: None)
    ParityReport(first).write_reports(str(tmp_path))
    added = run_parity(dataclasses.replace(config, seeds=(1,)), print_line=lambda line: None)
    assert added.config.seeds == (0, 1) and [run.seed for run in added.runs] == [0, 0, 1, 1]
    assert added.runs[:2] == first.runs  # read back from parity.json, not trained again
    assert gaps(added)["bfloat16"].n == 2
    with pytest.raises(ValueError, match=r"holds a comparison made with --steps=1 \(now 2\)"):
        run_parity(dataclasses.replace(config, seeds=(2,), steps=2), print_line=lambda line: None)
    ParityReport(added).write_reports(str(tmp_path))
    with pytest.raises(ValueError, match="pass --seeds it does not hold yet"):
        run_parity(dataclasses.replace(config, seeds=(1,)), print_line=lambda line: None)
