"""The decisions file (``decisions``): written by the chief, reused by a resumed run and the workers,
one clear error when it does not fit.
"""

import json
import os

import pytest

from slim_mp.graph_pass import placement
from slim_mp.graph_pass.placement import OpTiming, timing_cache, whole_steps
from slim_mp.timing import Timed

from .fakes import FakeMeasure, refuse, conv_chain, measured_rewrite


def test_decisions_file_is_written_then_reused_without_measuring(tmp_path):
    path = str(tmp_path / "run" / "placement.json")
    first = measured_rewrite(conv_chain(2)[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)}),
                             decisions_file=path)
    stored = json.load(open(path))
    assert set(stored["float32_ops"]) == {"conv0", "conv1"} and stored["precision"] == "bfloat16"
    # A resumed run (or a worker) with an empty cache reads the file and builds the same graph.
    (tmp_path / "cache").rename(tmp_path / "old_cache")
    graph, loss = conv_chain(2)
    again = measured_rewrite(loss, tmp_path, refuse, decisions_file=path, write_decisions=False)
    assert again.placement.float32_ops == first.placement.float32_ops
    assert again.placement.source == f"reused from {path}"
    assert again.ops_converted == 0


def test_worker_without_the_chiefs_file_warns_and_measures_itself(tmp_path):
    path = str(tmp_path / "missing" / "placement.json")
    measure = FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)})
    with pytest.warns(UserWarning, match="did not appear within 0s; measuring here"):
        report = measured_rewrite(conv_chain()[1], tmp_path, measure, decisions_file=path, write_decisions=False)
    assert measure.asked and report.placement.source == "measured"
    assert not os.path.exists(path), "only the writer (the chief) writes the decisions file"


def test_decisions_file_of_another_precision_is_an_error(tmp_path):
    path = tmp_path / "placement.json"
    path.write_text(json.dumps({"precision": "float16", "float32_ops": {}, "low_ops": []}))
    with pytest.raises(ValueError, match="placement.json holds placement decisions for 'float16'"):
        measured_rewrite(conv_chain()[1], tmp_path, refuse, decisions_file=str(path))


@pytest.mark.parametrize("content", ["{not json", json.dumps({"precision": "bfloat16", "float32_ops": [],
                                                                 "low_ops": []})])
def test_damaged_decisions_file_is_one_error_naming_it(tmp_path, content):
    path = tmp_path / "placement.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"placement.json: .*it is not a placement decisions file; delete the "
                                         r"file \(or pass another decisions_file\) to measure again"):
        measured_rewrite(conv_chain()[1], tmp_path, refuse, decisions_file=str(path))


def test_decisions_file_of_another_graph_is_an_error(tmp_path):
    path = str(tmp_path / "placement.json")
    measured_rewrite(conv_chain(2)[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)}), decisions_file=path)
    with pytest.raises(ValueError, match=r"placement.json holds placement decisions for another graph \(1 of its "
                                         r"ops, e.g. 'conv1', are not in this one\)"):
        measured_rewrite(conv_chain(1)[1], tmp_path, refuse, decisions_file=path)


MATMULS = {"LeNet/fc3/MatMul", "LeNet/fc4/MatMul"}


def allow_ops(names):
    """The convolutions and products among ``names`` (the placement also times the ops that follow them)."""
    return {name for name in names if name.endswith(("/Conv2D", "/MatMul"))}


def test_training_run_writes_its_decisions_and_a_resumed_run_reuses_them(tmp_path, monkeypatch):
    from slim_mp.training.learning_rate import LearningRateSettings
    from slim_mp.training.loop import train
    from slim_mp.training.optimizers import OptimizerSettings
    from slim_mp.training.precision_flags import PrecisionOptions
    from slim_mp.training.train_config import TrainConfig

    def fake_benchmark(signatures, precision, *args):
        # MatMuls slower in low precision, convolutions faster, the ops that follow them as fast either way.
        return {s: OpTiming(0.0, 0.001) if s.op_type == "Cast" else OpTiming(1.0, 5.0) if s.op_type == "MatMul"
                else OpTiming(5.0, 1.0) if s.op_type == "Conv2D" else OpTiming(1.0, 1.0) for s in signatures}

    def fake_steps(pool, candidates, *args, **kwargs):
        # Whole steps agree with the op timings: fastest with both matmuls (and no other conv/matmul) float32.
        return [Timed(1.0 if allow_ops(c.float32_ops) == MATMULS else 2.0) for c in candidates]

    monkeypatch.setenv(placement.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(placement.TIMINGS_FILE_ENV)
    monkeypatch.setattr(timing_cache, "micro_benchmark", fake_benchmark)
    monkeypatch.setattr(whole_steps, "time_candidate_steps", fake_steps)
    train_dir = tmp_path / "train"

    def run(steps):
        precision = PrecisionOptions(precision="bfloat16", mp_placement="measured",
                                     mp_report=str(tmp_path / f"report{steps}.json"))
        config = TrainConfig(
            train_dir=str(train_dir), dataset_name="fashion_mnist", model_name="lenet", batch_size=8,
            max_number_of_steps=steps, num_preprocessing_threads=1, seed=0, precision_options=precision,
            optimizer_settings=OptimizerSettings(optimizer="sgd"),
            learning_rate_settings=LearningRateSettings(learning_rate_decay_type="fixed", learning_rate=0.01))
        train(config, print_line=lambda line: None)
        (report,) = json.loads((tmp_path / f"report{steps}.json").read_text())["reports"]
        return report

    first = run(1)
    decisions = json.loads((train_dir / placement.DECISIONS_FILE_NAME).read_text())
    assert allow_ops(decisions["float32_ops"]) == MATMULS
    assert allow_ops(first["placement"]["low_ops"]) == {"LeNet/conv1/Conv2D", "LeNet/conv2/Conv2D"}
    # Resume with an empty cache and no way to measure: the file alone decides, the graph is the same.
    monkeypatch.setenv(placement.CACHE_ENV, str(tmp_path / "empty_cache"))
    monkeypatch.setattr(timing_cache, "micro_benchmark", refuse)
    second = run(2)
    assert second["placement"]["source"].startswith("reused from")
    assert second["float32_ops"] == first["float32_ops"]
    assert second["class_counts"] == first["class_counts"]


def test_a_decisions_file_with_an_unknown_check_verdict_is_one_error_naming_it(tmp_path):
    path = tmp_path / "placement.json"
    path.write_text(json.dumps({"precision": "bfloat16", "float32_ops": {}, "low_ops": [],
                                "check": {"verdict": "maybe", "reason": "hand-edited"}}))
    with pytest.raises(ValueError, match=r"placement.json: 'check' has the verdict 'maybe', not one of 'accepted', "
                                         r"'static', 'float32', 'not checked': it is not a placement decisions file"):
        measured_rewrite(conv_chain()[1], tmp_path, refuse, decisions_file=str(path))
