"""The parity report's arithmetic on hand-computed accuracies: mean ± sample std per arm, the paired gaps."""

import pytest

from slim_mp.measure.parity.paired_stats import INCONCLUSIVE
from slim_mp.measure.parity.parity_config import ParityConfig
from slim_mp.measure.parity.parity_report import ParityReport, gaps, summarize
from slim_mp.measure.parity.parity_results import ParityResult, RunRecord, StepLog

# top-1 per seed 0, 1, 2
FLOAT32 = (0.80, 0.82, 0.84)
BFLOAT16 = (0.81, 0.82, 0.86)
CONTROL = (0.80, 0.83, 0.83)


def record(arm: str, seed: int, accuracy: float) -> RunRecord:
    curves = StepLog(step=[1], loss=[0.5], loss_scale=[1.0], skipped=[0])
    return RunRecord(arm=arm, seed=seed, final_loss=0.5, accuracy=accuracy, eval_loss=0.6,
                     initial_checkpoint="initial", checkpoint="final", curves=curves, train_seconds=12.3)


@pytest.fixture
def result(tmp_path) -> ParityResult:
    config = ParityConfig(precision="bfloat16", seeds=(0, 1, 2), output_dir=str(tmp_path))
    arms = (("float32", FLOAT32), ("bfloat16", BFLOAT16), ("float32_perturbed", CONTROL))
    runs = [record(arm, seed, accuracies[seed]) for seed in range(3) for arm, accuracies in arms]
    return ParityResult(config, "test", runs)


def test_mean_and_sample_std_of_each_arm(result):
    summary = summarize(result)
    assert list(summary) == ["float32", "bfloat16", "float32_perturbed"]
    assert summary["float32"]["accuracy"].mean == pytest.approx(0.82)
    assert summary["float32"]["accuracy"].std == pytest.approx(0.02)  # sqrt((0.02² + 0 + 0.02²) / 2)
    assert summary["bfloat16"]["accuracy"].mean == pytest.approx(0.83)
    assert summary["bfloat16"]["accuracy"].std == pytest.approx(0.0007 ** 0.5)  # (0.02² + 0.01² + 0.03²) / 2


def test_the_gaps_are_paired_by_seed_in_percentage_points(result):
    mixed, control = gaps(result)["bfloat16"], gaps(result)["float32_perturbed"]
    # bfloat16 - float32: +1, 0, +2 pp: mean 1, s = 1; t(0.975, 2) = 4.303 (t-table): interval 1 ± 4.303 / sqrt(3).
    assert (mixed.n, mixed.mean, mixed.std) == (3, pytest.approx(1.0), pytest.approx(1.0))
    assert mixed.low == pytest.approx(1 - 4.303 / 3 ** 0.5, abs=1e-3)
    assert mixed.high == pytest.approx(1 + 4.303 / 3 ** 0.5, abs=1e-3)
    assert mixed.verdict == INCONCLUSIVE and mixed.margin == 0.5
    # control - float32: 0, +1, -1 pp: mean 0, s = 1.
    assert control.mean == pytest.approx(0.0, abs=1e-12) and control.std == pytest.approx(1.0)


def test_the_markdown_gives_both_gaps_their_interval_and_verdict(result):
    text = ParityReport(result).to_markdown()
    assert "| bfloat16 − float32 | 3 | +1.00 | 1.00 | [-1.48, +3.48] |" in text
    assert "| float32_perturbed − float32 | 3 | +0.00 | 1.00 | [-2.48, +2.48] |" in text
    assert text.count("| inconclusive |") == 2
    assert "| float32 | 0.8200 ± 0.0200 |" in text
    assert "batch-norm decay - (no batch norm)" in text  # LeNet, the default network, has none
    assert "| 0 | bfloat16 | 0.8100 |" in text and text.count("| 12 |") == 9


def test_the_json_holds_the_gaps_and_every_run_with_its_precision(result):
    record_ = ParityReport(result).to_dict()
    assert record_["arms"] == ["float32", "bfloat16", "float32_perturbed"]
    assert record_["gaps_points"]["bfloat16"]["mean"] == pytest.approx(1.0)
    assert set(record_["gaps_points"]) == {"bfloat16", "float32_perturbed"}
    assert [run["precision"] for run in record_["runs"][:3]] == ["float32", "bfloat16", "float32"]


def test_without_the_control_only_the_mixed_gap_is_reported(result):
    config = ParityConfig(precision="bfloat16", seeds=(0, 1, 2), output_dir=result.config.output_dir, control=False)
    without = ParityResult(config, "test", [run for run in result.runs if run.arm != "float32_perturbed"])
    assert list(gaps(without)) == ["bfloat16"]
    assert "float32_perturbed" not in ParityReport(without).to_markdown()
