"""MobileNet at 32 px after a short run: above chance with parity's batch-norm decay, at chance with the official one.

The cause: after n steps a moving average keeps decay^n of its initial value (variance 1, mean 0).
With MobileNet v1's official 0.9997, 0.9997^600 = 84% of each moving variance is still 1 while the
depthwise layers' true variances are far smaller, so evaluation (which normalises with the moving
averages) shrinks every layer's signal and predicts one class. Training, which normalises with each
batch's own statistics, is unaffected.
"""

import pytest

from nets import nets_factory
from slim_mp.datasets import get_dataset
from slim_mp.measure.parity.parity_config import ParityConfig, check_parity_config
from slim_mp.measure.parity.run_configs import evaluate_run, run_train_config
from slim_mp.measure.parity.time_to_accuracy import TimeToAccuracyConfig
from slim_mp.training import train

CHANCE = 0.1  # ten balanced classes
WELL_ABOVE_CHANCE = 0.3


@pytest.mark.parametrize("model_name, official", [
    ("mobilenet_v1", 0.9997), ("resnet_v1_18", 0.997), ("mobilenet_v2", 0.997), ("cifarnet", None), ("lenet", None),
])
def test_unset_the_decay_leaves_at_most_1e_4_of_the_initial_averages_after_the_run(model_name, official):
    short, long = ParityConfig(model_name=model_name, steps=600), ParityConfig(model_name=model_name, steps=40000)
    if official is None:
        assert short.effective_batch_norm_decay is None and long.effective_batch_norm_decay is None
        return
    assert short.effective_batch_norm_decay == pytest.approx(0.984767, abs=1e-6)  # 10^(-4/600), by hand
    assert short.effective_batch_norm_decay ** 600 == pytest.approx(1e-4)
    assert long.effective_batch_norm_decay == official  # 0.9997^40000 = 6e-6: the official decay is kept
    assert ParityConfig(model_name=model_name, batch_norm_decay=0.95).effective_batch_norm_decay == 0.95


def test_time_to_accuracy_fits_the_decay_to_its_first_evaluation_not_to_the_whole_run():
    # It evaluates every 250 steps: at 10^(-4/2000) = 0.9954, 0.9954^250 = 32% of the initial averages would
    # still be there at the first evaluation (top-1 0.10 for MobileNet at 32 px, measured).
    config = TimeToAccuracyConfig(model_name="mobilenet_v1", steps=2000, eval_every_n_steps=250)
    assert config.effective_batch_norm_decay ** 250 == pytest.approx(1e-4)
    assert TimeToAccuracyConfig(model_name="mobilenet_v1", steps=100, eval_every_n_steps=250
                                ).effective_batch_norm_decay ** 100 == pytest.approx(1e-4)


def test_a_decay_for_a_network_without_batch_norm_names_the_flag(tmp_path):
    with pytest.raises(ValueError, match=r"^--batch_norm_decay=0\.99: network cifarnet has no batch norm"):
        check_parity_config(ParityConfig(model_name="cifarnet", batch_norm_decay=0.99, output_dir=str(tmp_path)))


def _short_run(tmp_path, model_name: str, steps: int, batch_size: int, batch_norm_decay=None) -> float:
    """Top-1 of a float32 run as parity trains it, of ``model_name`` at 32 px on the bundled data."""
    config = ParityConfig(model_name=model_name, preprocessing_name="cifarnet", image_size=32, steps=steps,
                          batch_size=batch_size, log_every_n_steps=steps, batch_norm_decay=batch_norm_decay)
    train_config = run_train_config(config, get_dataset("fashion_mnist", "train"), 0, "float32",
                                    str(tmp_path / "train"), steps, None)
    checkpoint = train(train_config, print_line=lambda line: None).checkpoint
    return evaluate_run(config, checkpoint, str(tmp_path / "eval"), "test", "float32", lambda line: None)["accuracy"]


def test_a_short_mobilenet_run_evaluates_well_above_chance(tmp_path):
    # The quarter-width MobileNet v1 (the same blocks, batch norm and official 0.9997) keeps the default suite fast;
    # with the official decay this run evaluates at chance (the slow test below shows it on the full width).
    assert _short_run(tmp_path, "mobilenet_v1_025", steps=80, batch_size=16) > WELL_ABOVE_CHANCE


@pytest.mark.slow
def test_mobilenet_v1_at_600_steps_is_above_chance_only_with_the_short_run_decay(tmp_path):
    # The command: parity.py --model_name mobilenet_v1 --image_size 32 --steps 600 (its float32 arm).
    assert _short_run(tmp_path / "parity_default", "mobilenet_v1", 600, 32) > 0.6
    official = nets_factory.batch_norm_decay("mobilenet_v1")
    assert _short_run(tmp_path / "official", "mobilenet_v1", 600, 32, batch_norm_decay=official) < CHANCE + 0.02
