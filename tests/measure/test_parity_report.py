"""The parity report's arithmetic on hand-computed accuracies: mean ± sample std per precision, the paired gap."""

import pytest

from slim_mp.measure.parity.parity_config import ParityConfig
from slim_mp.measure.parity.parity_report import ParityReport, accuracy_difference, summarize
from slim_mp.measure.parity.parity_results import ParityResult, RunRecord, StepLog

# top-1 per seed 0, 1, 2
FLOAT32 = (0.80, 0.82, 0.84)
BFLOAT16 = (0.81, 0.82, 0.86)


def record(precision: str, seed: int, accuracy: float) -> RunRecord:
    curves = StepLog(step=[1], loss=[0.5], loss_scale=[1.0], skipped=[0])
    return RunRecord(precision=precision, seed=seed, final_loss=0.5, accuracy=accuracy, eval_loss=0.6,
                     initial_checkpoint="initial", checkpoint="final", curves=curves)


@pytest.fixture
def result(tmp_path) -> ParityResult:
    config = ParityConfig(precision="bfloat16", seeds=(0, 1, 2), output_dir=str(tmp_path))
    runs = [record(precision, seed, accuracies[seed])
            for seed in range(3) for precision, accuracies in (("float32", FLOAT32), ("bfloat16", BFLOAT16))]
    return ParityResult(config, "test", runs)


def test_mean_and_sample_std_of_each_precision(result):
    summary = summarize(result)
    assert summary["float32"]["accuracy"].mean == pytest.approx(0.82)
    assert summary["float32"]["accuracy"].std == pytest.approx(0.02)  # sqrt((0.02² + 0 + 0.02²) / 2)
    assert summary["bfloat16"]["accuracy"].mean == pytest.approx(0.83)
    assert summary["bfloat16"]["accuracy"].std == pytest.approx(0.0007 ** 0.5)  # (0.02² + 0.01² + 0.03²) / 2


def test_the_gap_is_paired_by_seed(result):
    gap = accuracy_difference(result)  # differences 0.01, 0.00, 0.02
    assert gap.mean == pytest.approx(0.01)
    assert gap.std == pytest.approx(0.01)


def test_the_markdown_gives_the_gap_in_percentage_points(result):
    text = ParityReport(result).to_markdown()
    assert "paired by seed: 0.0100 ± 0.0100 (+1.00 ± 1.00 pp)." in text
    assert "| float32 | 0.8200 ± 0.0200 |" in text
