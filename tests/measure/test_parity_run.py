"""Parity's placement option and its count of lowered conv/matmul-class ops, on a tiny LeNet run."""

import dataclasses
import os
import types

import pytest

from slim_mp.measure.parity.parity_config import ParityConfig
from slim_mp.measure.parity.parity_report import ParityReport
from slim_mp.measure.parity.parity_run import lowered_allow_ops, run_parity

# LeNet's conv/matmul-class ops, counted from nets/lenet.py: conv1, conv2 (Conv2D), fc3, logits (MatMul).
# Training rewrites the forward graph (the gradients follow its dtypes), so these are all the pass sees.
LENET_ALLOW_OPS = 4


@pytest.fixture(scope="module")
def static_run(tmp_path_factory):
    """One seed, one step, bfloat16 with the static placement (every allow op low)."""
    config = ParityConfig(model_name="lenet", precision="bfloat16", steps=1, seeds=(0,), batch_size=4,
                          log_every_n_steps=1, placement="static",
                          output_dir=str(tmp_path_factory.mktemp("parity_static")))
    return run_parity(config, print_line=lambda line: None)


def test_the_static_placement_lowers_every_conv_and_matmul_op(static_run):
    float32, bfloat16 = static_run.runs
    assert (float32.precision, float32.low_allow_ops, float32.allow_ops) == ("float32", None, None)
    assert (bfloat16.low_allow_ops, bfloat16.allow_ops) == (LENET_ALLOW_OPS, LENET_ALLOW_OPS)
    train_dir = os.path.dirname(bfloat16.checkpoint)
    # The measured placement would have written its decisions there: static was passed through.
    assert not os.path.exists(os.path.join(train_dir, "placement.json"))


def test_the_report_shows_the_count_per_mixed_run(static_run):
    report = ParityReport(static_run)
    row = next(line for line in report.to_markdown().splitlines() if line.startswith("| 0 | bfloat16 |"))
    assert row.endswith(f"| {LENET_ALLOW_OPS} of {LENET_ALLOW_OPS} |")
    assert "ran no conv/matmul-class op low" not in report.to_markdown()
    assert report.to_dict()["runs"][1]["low_allow_ops"] == LENET_ALLOW_OPS
    assert report.to_dict()["config"]["placement"] == "static"


def test_a_run_that_lowered_nothing_is_flagged(static_run):
    untouched = dataclasses.replace(static_run.runs[1], low_allow_ops=0)
    text = ParityReport(dataclasses.replace(static_run, runs=[static_run.runs[0], untouched])).to_markdown()
    assert "Warning: the bfloat16 run of seed(s) 0 ran no conv/matmul-class op low" in text


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
