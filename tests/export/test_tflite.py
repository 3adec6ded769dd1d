"""TensorFlow Lite export and evaluation, against TensorFlow's own run of the frozen float32 graph.

The suite's 30-step LeNet (``script_runs.trained_lenet``) is exported by ``export_inference_graph.py``
as a frozen float32 graph and as float32, float16 and int8 ``.tflite`` models; TensorFlow runs the
frozen graph (the oracle), LiteRT runs the models, all on the 2000 bundled test images. A model
this short-trained has small logit margins, so the top-1 fractions here are looser than those of the
trained LeNet (``test_trained_lenet_meets_the_issue_bounds``, slow, and docs/operations.md).
"""

import collections
import json
import os
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from argument_errors import raises_naming
from script_runs import (
    EVAL_SCRIPT, REPO_ROOT, TRAIN_SCRIPT, check_bad_input, check_ok, evaluated_lenet, run_script, trained_lenet,
)
from slim_mp.datasets.fashion_mnist import load_bundled
from slim_mp.export.exporter import export_model
from slim_mp.export.inference_graph import ExportConfig
from slim_mp.export.tflite_model import convert_to_tflite, float32_ops
from slim_mp.training import EvalConfig, TrainConfig, check_train_config, evaluate
from slim_mp.training.precision_flags import PrecisionOptions
from slim_mp.training.tflite_interpreter import load_tflite_model

tf1 = tf.compat.v1
EXPORT_SCRIPT = os.path.join(REPO_ROOT, "scripts", "export_inference_graph.py")
REPORT_SCRIPT = os.path.join(REPO_ROOT, "scripts", "tflite_report.py")
LENET = ("--model_name=lenet", "--dataset_name=fashion_mnist")
TEST_IMAGES, TEST_LABELS = load_bundled("test")
# The same float32 computation, by TensorFlow's kernels and by LiteRT's (XNNPACK): sums in another order.
FLOAT32_PROBABILITY_ATOL = 1e-5
# Top-1 classes equal to the frozen float32 graph's, on the 2000 test images, for the 30-step LeNet
# (measured 0.999 and 0.983; the trained LeNet's bounds, 0.995 and 0.97, are checked by the slow test).
MIN_FLOAT16_AGREEMENT = 0.99
MIN_INT8_AGREEMENT = 0.95
MAX_FLOAT16_SIZE_RATIO, MAX_INT8_SIZE_RATIO = 0.55, 0.30  # of the float32 model's bytes (the issue's bounds)
KINDS = {"float32": (), "float16": ("--precision=float16",), "int8": ("--quantize",)}


def lenet_inputs() -> np.ndarray:
    """The test split as LeNet's evaluation preprocessing makes it (one channel, [0, 255] -> [-1, 1))."""
    return (TEST_IMAGES[..., np.newaxis].astype(np.float32) - 128.0) / 128.0


def frozen_outputs(path: str, images: np.ndarray) -> dict:
    """TensorFlow's run of a frozen graph: {output name: array}."""
    graph_def = tf1.GraphDef()
    with open(path, "rb") as handle:
        graph_def.ParseFromString(handle.read())
    with tf.Graph().as_default():
        tf1.import_graph_def(graph_def, name="")
        with tf1.Session() as session:
            logits, probabilities, classes = session.run(["logits:0", "probabilities:0", "classes:0"],
                                                         {"input:0": images})
    return {"logits": logits, "probabilities": probabilities, "classes": classes}


@pytest.fixture(scope="module")
def lenet_dir() -> str:
    return trained_lenet().train_dir


@pytest.fixture(scope="module")
def exports(lenet_dir, tmp_path_factory) -> dict:
    """{kind: path} of the frozen float32 graph ("frozen") and the three .tflite models, each written by the script."""
    folder = tmp_path_factory.mktemp("tflite")
    paths = {"frozen": str(folder / "lenet.pb")}
    check_ok(run_script(EXPORT_SCRIPT, *LENET, f"--checkpoint_path={lenet_dir}", f"--output_file={paths['frozen']}"))
    for kind, flags in KINDS.items():
        paths[kind] = str(folder / f"lenet_{kind}.tflite")
        process = check_ok(run_script(EXPORT_SCRIPT, *LENET, f"--checkpoint_path={lenet_dir}", *flags,
                                      f"--output_file={paths[kind]}"))
        assert f"wrote {paths[kind]}: {os.path.getsize(paths[kind])} bytes" in process.stdout
    return paths


@pytest.fixture(scope="module")
def outputs(exports) -> dict:
    """{kind: outputs} on the 2000 test images: TensorFlow's for "frozen", LiteRT's for the models."""
    images = lenet_inputs()
    found = {"frozen": frozen_outputs(exports["frozen"], images)}
    for kind in KINDS:
        found[kind] = load_tflite_model(exports[kind], "checkpoint_path").outputs(images)
    return found


def test_float32_model_computes_the_frozen_graphs_probabilities(outputs):
    np.testing.assert_allclose(outputs["float32"]["probabilities"], outputs["frozen"]["probabilities"],
                               atol=FLOAT32_PROBABILITY_ATOL, rtol=0)
    np.testing.assert_array_equal(outputs["float32"]["classes"], outputs["frozen"]["classes"])


@pytest.mark.parametrize("kind, minimum", [("float16", MIN_FLOAT16_AGREEMENT), ("int8", MIN_INT8_AGREEMENT)])
def test_low_precision_models_agree_with_the_frozen_graphs_top1(outputs, kind, minimum):
    agreement = float(np.mean(outputs[kind]["classes"] == outputs["frozen"]["classes"]))
    assert agreement >= minimum, (kind, agreement)


def test_models_keep_the_frozen_graphs_names_dtypes_and_any_batch(exports, outputs):
    for kind in KINDS:
        model = load_tflite_model(exports[kind], "checkpoint_path")
        details = {detail["name"]: detail for detail in model.interpreter.get_output_details()}
        assert model.input_shape == (-1, 28, 28, 1), kind
        assert {name: details[name]["dtype"] for name in details} == {
            "logits": np.float32, "probabilities": np.float32, "classes": np.int64}, kind
        assert model.is_int8 == (kind == "int8")
        np.testing.assert_allclose(outputs[kind]["probabilities"].sum(axis=1), 1.0, atol=0.02)  # int8: 1/256 steps


def test_float16_and_int8_models_are_at_most_055_and_030_of_float32(exports):
    float32, float16, int8 = (os.path.getsize(exports[kind]) for kind in KINDS)
    assert float16 <= MAX_FLOAT16_SIZE_RATIO * float32, (float16, float32)
    assert int8 <= MAX_INT8_SIZE_RATIO * float32, (int8, float32)


def test_eval_script_writes_the_checkpoints_metrics_for_the_float32_model(exports, tmp_path):
    checkpoint = evaluated_lenet()  # the eval script's float32 metrics.json for the same checkpoint
    eval_dir = str(tmp_path / "eval")
    process = check_ok(run_script(EVAL_SCRIPT, f"--checkpoint_path={exports['float32']}", f"--eval_dir={eval_dir}",
                                  *LENET, "--batch_size=300"))
    with open(os.path.join(eval_dir, "metrics.json"), encoding="utf-8") as handle:
        metrics = json.load(handle)
    assert sorted(metrics) == sorted(checkpoint.metrics)
    assert metrics["num_examples"] == checkpoint.metrics["num_examples"] == 2000
    assert metrics["global_step"] is None and metrics["checkpoint"] == exports["float32"]
    for key in ("accuracy", "top5"):  # a near-tie may fall the other way: one image in 2000 at most
        assert abs(metrics[key] - checkpoint.metrics[key]) <= 1 / 2000, key
    assert metrics["loss"] == pytest.approx(checkpoint.metrics["loss"], abs=1e-4)
    assert [line.split("=")[0] for line in process.stdout.split()] == \
        [line.split("=")[0] for line in checkpoint.stdout.split()]
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(eval_dir))


def top1_hits_as_in_top_k(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """TensorFlow's in_top_k with k=1, as evaluation counts: the label's logit is the largest, ties included."""
    return logits[np.arange(len(labels)), labels] >= logits.max(axis=1)


def test_eval_quantize_reads_the_int8_model_and_counts_its_top1(exports, outputs, tmp_path):
    metrics = evaluate(EvalConfig(checkpoint_path=exports["int8"], eval_dir=str(tmp_path), model_name="lenet",
                                  dataset_name="fashion_mnist", quantize=True, batch_size=500),
                       print_line=lambda line: None)
    assert metrics["accuracy"] == pytest.approx(np.mean(top1_hits_as_in_top_k(outputs["int8"]["logits"],
                                                                             TEST_LABELS)), abs=1e-12)


def _export_config(**overrides) -> ExportConfig:
    return ExportConfig(**{"model_name": "lenet", "dataset_name": "fashion_mnist", **overrides})


@pytest.mark.parametrize("overrides, expected", [
    ({"precision_options": PrecisionOptions("bfloat16")}, "--precision=bfloat16: --output_file=OUT is a TensorFlow "
     "Lite model, which stores no bfloat16 weights; pass --precision=float16"),
    ({"checkpoint_path": None}, "--output_file=OUT needs trained weights: pass --checkpoint_path"),
    ({"quantize": True, "precision_options": PrecisionOptions("float16")}, "--quantize with --precision=float16"),
    ({"write_text_graphdef": True}, "--write_text_graphdef with --output_file=OUT"),
    ({"precision_options": PrecisionOptions(mp_deny_ops=("Conv2D",))}, "--mp_deny_ops=Conv2D with --output_file"),
    ({"quantize": True, "calibration_samples": 0}, "--calibration_samples=0 must be a positive integer"),
    ({"quantize": True, "model_name": "i3d", "is_video_model": True, "num_frames": 8}, "--quantize with "
     "--is_video_model: the int8 calibration reads the data set's images"),
])
def test_tflite_options_it_cannot_honour_are_refused_before_any_work(overrides, expected, lenet_dir, tmp_path):
    output = str(tmp_path / "model.tflite")
    overrides = {key: value.replace("OUT", output) if isinstance(value, str) else value
                 for key, value in overrides.items()}
    config = _export_config(**{"checkpoint_path": lenet_dir, "output_file": output, **overrides})
    with pytest.raises(ValueError) as raised:
        export_model(config, print_line=lambda line: None)
    assert str(raised.value).startswith(expected.replace("OUT", output)), str(raised.value)
    assert os.listdir(tmp_path) == []


def test_an_op_tensorflow_lite_lacks_is_named_without_the_converters_output(capfd):
    """A frozen graph with a MaxPool3D, the op that stops the video networks (i3d, s3dg), given to the converter."""
    with tf.Graph().as_default() as graph:
        clips = tf1.placeholder(tf.float32, [None, 4, 8, 8, 3], name="input")
        pooled = tf.nn.max_pool3d(clips, ksize=2, strides=2, padding="VALID", name="Mixed/MaxPool3D")
        logits = tf.identity(tf.reduce_mean(pooled, axis=[1, 2, 3]), name="logits")
        tf.nn.softmax(logits, name="probabilities")
        tf.argmax(logits, axis=-1, name="classes")
    config = _export_config(model_name="i3d", output_file="model.tflite", checkpoint_path="unused")
    with pytest.raises(ValueError) as raised:
        convert_to_tflite(graph.as_graph_def(), config, None)
    assert str(raised.value).startswith(
        "--model_name=i3d cannot be converted to TensorFlow Lite: its graph uses MaxPool3D (1 node, e.g. "
        "Mixed/MaxPool3D), which TensorFlow Lite's built-in ops lack; export a frozen graph"), str(raised.value)
    assert "error:" not in capfd.readouterr().err  # the converter's diagnostics went to its log, not the screen


def test_export_refusal_is_one_error_line_from_the_script(lenet_dir, tmp_path):
    process = run_script(EXPORT_SCRIPT, *LENET, f"--checkpoint_path={lenet_dir}", "--precision=bfloat16",
                         f"--output_file={tmp_path}/model.tflite")
    check_bad_input(process, "error: --precision=bfloat16:")


@pytest.mark.parametrize("arguments, expected", [
    (("--quantize",), "error: --quantize: --checkpoint_path=FLOAT32 is not an int8 model"),
    (("--precision=float16",), "error: --precision=float16 does not apply to --checkpoint_path=FLOAT32"),
    (("--eval_image_size=32",), "error: --eval_image_size=32: --checkpoint_path=FLOAT32 reads 28x28 images"),
    (("--labels_offset=1",), "error: --checkpoint_path=FLOAT32 has 10 classes, --dataset_name=fashion_mnist 9 "
     "(after --labels_offset=1)"),
])
def test_eval_refusals_of_a_tflite_model_are_one_error_line(exports, tmp_path, arguments, expected):
    process = run_script(EVAL_SCRIPT, f"--checkpoint_path={exports['float32']}", f"--eval_dir={tmp_path}/eval",
                         *LENET, *arguments)
    check_bad_input(process, expected.replace("FLOAT32", exports["float32"]))


def test_a_file_that_is_not_a_tflite_model_is_named(tmp_path):
    path = tmp_path / "model.tflite"
    path.write_text("not a flatbuffer")
    with raises_naming(f"^--checkpoint_path={re.escape(str(path))} is not a TensorFlow Lite model LiteRT can run"):
        load_tflite_model(str(path), "checkpoint_path")


def test_without_litert_the_error_names_the_install_command(exports, monkeypatch):
    monkeypatch.setitem(sys.modules, "ai_edge_litert.interpreter", None)  # what a missing package gives: ImportError
    with pytest.raises(ValueError, match=r"LiteRT, which is not installed .*; install it: pip install "
                                         r"'ai-edge-litert==2\.3\.0'"):
        load_tflite_model(exports["float32"], "checkpoint_path")


def test_quantization_aware_training_is_refused_naming_post_training_quantization():
    with pytest.raises(ValueError) as raised:
        check_train_config(TrainConfig(quantize_delay=0))
    assert "export_inference_graph.py --quantize --output_file=model.tflite" in str(raised.value)


# The LeNet of docs/operations.md "From training to serving" (TensorFlow Lite), trained by the script.
TRAINED_LENET_ARGS = ("--model_name=lenet", "--dataset_name=fashion_mnist", "--batch_size=32", "--optimizer=adam",
                      "--learning_rate=0.001", "--opt_epsilon=1e-7", "--learning_rate_decay_type=fixed",
                      "--max_number_of_steps=1000", "--seed=0")


def report_rows(stdout: str) -> dict:
    """{file kind: (size ratio, top-1, agreement)} of the table ``tflite_report.py`` printed."""
    rows = {}
    for line in stdout.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 6 and cells[0] == "lenet":
            rows[cells[1].split(" (")[0]] = (float(cells[3]), float(cells[4].rstrip("%")) / 100,
                                             float(cells[5].rstrip("%")) / 100)
    return rows


@pytest.mark.slow
def test_trained_lenet_meets_the_issue_bounds_and_the_eval_script_reads_its_models(tmp_path):
    """Issue 53: float16 agrees with the frozen float32 graph on >= 99.5% of the 2000 test images at <= 0.55x the
    float32 model's bytes, int8 on >= 97% at <= 0.30x (the table of scripts/tflite_report.py); the eval script
    reads both models."""
    train_dir, models = str(tmp_path / "lenet"), str(tmp_path / "models")
    check_ok(run_script(TRAIN_SCRIPT, f"--train_dir={train_dir}", *TRAINED_LENET_ARGS))
    report = check_ok(run_script(REPORT_SCRIPT, f"--checkpoint_path={train_dir}", *LENET, f"--output_dir={models}"))
    rows = report_rows(report.stdout)
    assert sorted(rows) == ["float16", "float32", "frozen float32 graph", "int8"], report.stdout
    assert rows["float32"][2] == 1.0
    assert rows["float16"][2] >= 0.995 and rows["float16"][0] <= MAX_FLOAT16_SIZE_RATIO, rows["float16"]
    assert rows["int8"][2] >= 0.97 and rows["int8"][0] <= MAX_INT8_SIZE_RATIO, rows["int8"]
    for kind, flags in (("float16", ()), ("int8", ("--quantize",))):
        path, eval_dir = os.path.join(models, f"lenet_{kind}.tflite"), str(tmp_path / f"eval_{kind}")
        check_ok(run_script(EVAL_SCRIPT, f"--checkpoint_path={path}", f"--eval_dir={eval_dir}", *LENET, *flags))
        with open(os.path.join(eval_dir, "metrics.json"), encoding="utf-8") as handle:
            accuracy = json.load(handle)["accuracy"]
        logits = load_tflite_model(path, "checkpoint_path").outputs(lenet_inputs())["logits"]
        assert accuracy == pytest.approx(np.mean(top1_hits_as_in_top_k(logits, TEST_LABELS)), abs=1e-12), kind
        assert accuracy >= rows[kind][1] - 0.00005  # the table's top-1 is argmax's: the first of tied logits only


def test_the_report_refuses_a_flag_that_picks_one_kind(tmp_path):
    process = run_script(REPORT_SCRIPT, "--checkpoint_path=unused", *LENET, f"--output_dir={tmp_path}", "--quantize")
    check_bad_input(process, "error: --quantize=True: the comparison writes every kind of model itself")


@pytest.mark.slow
def test_the_video_network_i3d_is_one_error_naming_its_3d_pooling_ops(tmp_path):
    """i3d, the zoo's video network, pools in 3-D, which TensorFlow Lite's built-in ops cannot (a random-weight
    checkpoint of a small clip is enough: the converter stops before reading any value)."""
    from slim_mp.export.inference_graph import build_inference_graph

    video = {"model_name": "i3d", "dataset_name": "fashion_mnist", "is_video_model": True, "num_frames": 8,
             "image_size": 64}
    built = build_inference_graph(ExportConfig(**video))
    with built.graph.as_default(), tf1.Session() as session:
        session.run(tf1.global_variables_initializer())
        checkpoint = tf1.train.Saver().save(session, str(tmp_path / "i3d" / "model.ckpt"))
    output = tmp_path / "i3d.tflite"
    process = run_script(EXPORT_SCRIPT, *(f"--{name}={value}" for name, value in video.items()),
                         f"--checkpoint_path={checkpoint}", f"--output_file={output}")
    check_bad_input(process, "error: --model_name=i3d cannot be converted to TensorFlow Lite: its graph uses "
                             "AvgPool3D (1 node, e.g. ")
    assert "MaxPool3D (" in process.stderr and not output.exists()


def test_float32_ops_of_a_model_are_those_tensorflows_analyzer_lists(exports, capsys):
    """``float32_ops`` against TensorFlow's own model analyzer: every op of the float32 model reads float32 (less
    the boundary ops), none of the int8 LeNet's does."""
    capsys.readouterr()
    tf.lite.experimental.Analyzer.analyze(model_path=exports["float32"])
    listed = re.findall(r"Op#\d+ (\w+)\(", capsys.readouterr().out)
    expected = collections.Counter(op for op in listed if op not in ("QUANTIZE", "DEQUANTIZE", "ARG_MAX"))
    with open(exports["float32"], "rb") as handle:
        assert float32_ops(handle.read()) == dict(expected) and expected["CONV_2D"] == 2
    with open(exports["int8"], "rb") as handle:
        assert float32_ops(handle.read()) == {}


def test_a_model_exported_with_a_fixed_batch_runs_any_batch_in_chunks(lenet_dir, outputs, tmp_path):
    path = str(tmp_path / "lenet_batch7.tflite")
    export_model(_export_config(checkpoint_path=lenet_dir, output_file=path, batch_size=7),
                 print_line=lambda line: None)
    model = load_tflite_model(path, "checkpoint_path")
    assert model.input_shape == (7, 28, 28, 1)
    found = model.outputs(lenet_inputs()[:20])  # chunks of 7, 7 and 6 (padded to 7)
    np.testing.assert_allclose(found["probabilities"], outputs["float32"]["probabilities"][:20],
                               atol=FLOAT32_PROBABILITY_ATOL, rtol=0)
