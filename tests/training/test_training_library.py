"""The training library in-process: losses, loss-scale options, config checks, moving averages end to end."""

import json

import numpy as np
import pytest
import tensorflow as tf
from train_configs import lenet_config

from slim_mp.loss_scale.managers import (
    ExponentialUpdateLossScaleManager,
    FixedLossScaleManager,
    NoLossScaling,
)
from slim_mp.training.evaluation import EvalConfig, evaluate
from slim_mp.training.loop import train
from slim_mp.training.precision_flags import LossScaleOptions, PrecisionOptions
from slim_mp.training.train_config import TrainConfig, check_train_config
from slim_mp.distribute import ClusterLayout
from slim_mp.training.train_graph import add_classification_losses, build_train_graph

tf1 = tf.compat.v1
RTOL = 1e-5  # float32 softmax cross-entropy against a float64 numpy reference


def numpy_cross_entropy(logits: np.ndarray, labels: np.ndarray, smoothing: float) -> float:
    logits = logits.astype(np.float64)
    num_classes = logits.shape[1]
    targets = np.eye(num_classes)[labels] * (1 - smoothing) + smoothing / num_classes
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return float(-(targets * log_probs).sum(axis=1).mean())


def test_aux_logits_add_a_loss_weighted_point_four_with_label_smoothing():
    rng = np.random.default_rng(1)
    logits, aux = rng.normal(size=(2, 4, 3)).astype(np.float32)
    labels = np.array([0, 2, 1, 1])
    with tf.Graph().as_default():
        add_classification_losses(tf.constant(logits), {"AuxLogits": tf.constant(aux)}, tf.constant(labels), 3, 0.1)
        with tf1.Session() as session:
            total = session.run(tf1.losses.get_total_loss(add_regularization_losses=False))
    expected = numpy_cross_entropy(logits, labels, 0.1) + 0.4 * numpy_cross_entropy(aux, labels, 0.1)
    assert total == pytest.approx(expected, rel=RTOL)


@pytest.mark.parametrize("loss_scale", ["big", "0.5", "inf", "nan", "-2"])
def test_a_bad_loss_scale_is_refused_when_the_options_are_built_with_one_wording(loss_scale):
    with pytest.raises(ValueError) as raised:
        LossScaleOptions(loss_scale=loss_scale)
    assert str(raised.value) == (f"--loss_scale={loss_scale} is neither 'dynamic' nor a number >= 1; "
                                 "pass e.g. --loss_scale=dynamic or --loss_scale=128.")


@pytest.mark.parametrize("loss_scale", [None, "dynamic", "1", "128", "1e30"])
def test_the_loss_scales_the_flag_accepts_build_options(loss_scale):
    assert LossScaleOptions(loss_scale=loss_scale).loss_scale == loss_scale


def test_loss_scale_options_pick_the_manager():
    with tf.Graph().as_default():
        assert isinstance(LossScaleOptions().manager("float16"), ExponentialUpdateLossScaleManager)
        assert isinstance(LossScaleOptions().manager("bfloat16"), NoLossScaling)
        assert isinstance(LossScaleOptions(loss_scale="1").manager("bfloat16"), FixedLossScaleManager)
        assert isinstance(LossScaleOptions(loss_scale="dynamic").manager("bfloat16"),
                          ExponentialUpdateLossScaleManager)
        fixed = LossScaleOptions(loss_scale="128").manager("float16")
        with tf1.Session() as session:
            assert session.run(fixed.get_loss_scale()) == 128.0
        with pytest.raises(ValueError, match="--loss_scale_"):
            LossScaleOptions(loss_scale="dynamic", loss_scale_decr_ratio=2.0).manager("float16")


def test_quantized_training_is_refused_naming_the_flag():
    with pytest.raises(ValueError, match="^--quantize_delay=0 is not supported"):
        check_train_config(TrainConfig(quantize_delay=0))


def test_label_smoothing_out_of_range_names_the_flag():
    with pytest.raises(ValueError, match="--label_smoothing=1.5"):
        check_train_config(TrainConfig(label_smoothing=1.5))


def test_trainable_scopes_that_match_nothing_name_the_flag(tmp_path):
    with pytest.raises(ValueError, match="--trainable_scopes=Nope matches no trainable variable"):
        train(lenet_config(str(tmp_path), trainable_scopes="Nope"), print_line=lambda line: None)


def test_moving_averages_are_trained_saved_and_evaluated(tmp_path):
    lines = []
    result = train(lenet_config(str(tmp_path), moving_average_decay=0.9), print_line=lines.append)
    assert result.global_step == 2 and lines[-1].startswith("step=2 ")
    assert result.rewrite_reports == ()  # float32: the graph pass did not run
    reader = tf.train.load_checkpoint(result.checkpoint)
    weights = reader.get_tensor("LeNet/conv1/weights")
    average = reader.get_tensor("LeNet/conv1/weights/ExponentialMovingAverage")
    assert not np.array_equal(weights, average)
    metrics = evaluate(
        EvalConfig(checkpoint_path=result.checkpoint, eval_dir=str(tmp_path / "eval"), dataset_name="fashion_mnist",
                   model_name="lenet", batch_size=1000, max_num_batches=1, moving_average_decay=0.9),
        print_line=lambda line: None,
    )
    assert metrics["num_examples"] == 1000 and metrics["global_step"] == 2


def test_mp_report_writes_the_graph_pass_report_as_json(tmp_path):
    report_path = tmp_path / "report.json"
    precision = PrecisionOptions(precision="bfloat16", mp_report=str(report_path), mp_keep_fp32_scopes=("LeNet/fc4",))
    train(lenet_config(str(tmp_path / "train"), max_number_of_steps=1, precision_options=precision),
          print_line=lambda line: None)
    reports = json.loads(report_path.read_text())["reports"]
    assert len(reports) == 1 and reports[0]["precision"] == "bfloat16"
    assert reports[0]["ops_converted"] > 0
    kept = [name for names in reports[0]["float32_ops"].values() for name in names]
    assert "LeNet/fc4/MatMul" in kept


def test_a_float32_train_graph_has_no_pass_report_and_no_probe(tmp_path):
    built = build_train_graph(lenet_config(str(tmp_path)), ClusterLayout())
    assert built.rewrite_reports == () and built.nonfinite_probes == ()


def test_a_mixed_precision_train_graph_carries_the_pass_report_and_the_probes(tmp_path):
    precision = PrecisionOptions(precision="bfloat16", mp_debug_nonfinite=True)
    built = build_train_graph(lenet_config(str(tmp_path), precision_options=precision), ClusterLayout())
    (report,) = built.rewrite_reports
    assert report.ops_converted > 0
    # One gradient computation, so one probe: the one the optimizer built, in this graph.
    assert len(built.nonfinite_probes) == 1
    assert list(built.nonfinite_probes) == built.optimizer.nonfinite_probes
    assert all(t.graph is built.graph for t in built.nonfinite_probes[0].captured)
