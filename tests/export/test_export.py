"""scripts/export_inference_graph.py: frozen float32 / bfloat16 graphs and SavedModels served by plain TensorFlow.

A LeNet trained for a few steps is exported; a fresh Python process that imports only TensorFlow
(checked in its ``sys.modules``) runs each export on the bundled test split, and its top-1 is
compared with what ``scripts/eval_image_classifier.py`` reports for the checkpoint.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from script_runs import EVAL_SCRIPT, REPO_ROOT, check_ok, run_script, trained_lenet
from slim_mp.datasets.fashion_mnist import load_bundled
from slim_mp.export.exporter import export_model
from slim_mp.export.inference_graph import ExportConfig
from slim_mp.training.precision_flags import PrecisionOptions

tf1 = tf.compat.v1
EXPORT_SCRIPT = os.path.join(REPO_ROOT, "scripts", "export_inference_graph.py")
TEST_IMAGES, TEST_LABELS = load_bundled("test")
LENET = ("--model_name=lenet", "--dataset_name=fashion_mnist")
BFLOAT16_TOP1_TOLERANCE = 0.005  # 0.5 percentage points
MAX_BFLOAT16_SIZE_RATIO = 0.55
PRECISIONS = ("float32", "bfloat16")

# Runs in a fresh interpreter: only TensorFlow and numpy may be imported to serve the exports.
SERVE_SCRIPT = r"""
import sys
import numpy as np
import tensorflow as tf

images_path, output_path, *exports = sys.argv[1:]
images = np.load(images_path)["images"]
results = {}
for precision, frozen_path, saved_model_dir in zip(exports[::3], exports[1::3], exports[2::3]):
    graph_def = tf.compat.v1.GraphDef()
    with open(frozen_path, "rb") as handle:
        graph_def.ParseFromString(handle.read())
    with tf.Graph().as_default() as graph:
        tf.compat.v1.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph) as session:
            logits, classes = session.run(["logits:0", "classes:0"], {"input:0": images})
        results[f"{precision}_input_dtype"] = np.array(graph.get_tensor_by_name("input:0").dtype.name)
    served = tf.saved_model.load(saved_model_dir).signatures["serving_default"](images=tf.constant(images))
    results.update({
        f"{precision}_frozen_logits": logits, f"{precision}_frozen_classes": classes,
        f"{precision}_served_logits": served["logits"].numpy(),
        f"{precision}_served_classes": served["classes"].numpy(),
        f"{precision}_served_probabilities": served["probabilities"].numpy(),
    })
forbidden = sorted(name for name in sys.modules if name.split(".")[0] in ("slim_mp", "tf_slim", "nets"))
np.savez(output_path, forbidden=np.array(forbidden, dtype=str), **results)
"""


@pytest.fixture(scope="module")
def lenet_dir():
    return trained_lenet().train_dir


@pytest.fixture(scope="module")
def exports(lenet_dir, tmp_path_factory):
    """Frozen graph and SavedModel of the LeNet checkpoint in float32 and bfloat16: {precision: (file, folder)}."""
    folder = tmp_path_factory.mktemp("exports")
    paths = {}
    for precision in PRECISIONS:
        frozen, saved_model = str(folder / f"lenet_{precision}.pb"), str(folder / f"saved_model_{precision}")
        process = check_ok(run_script(
            EXPORT_SCRIPT, *LENET, f"--checkpoint_path={lenet_dir}", f"--precision={precision}",
            f"--output_file={frozen}", f"--saved_model_dir={saved_model}",
        ))
        assert f"wrote {frozen}: {os.path.getsize(frozen)} bytes, {precision}" in process.stdout
        paths[precision] = (frozen, saved_model)
    return paths


def preprocessed_test_images() -> np.ndarray:
    """The test split as LeNet's preprocessing makes it (one channel, [0, 255] -> [-1, 1)), computed here in numpy."""
    images = TEST_IMAGES[..., np.newaxis].astype(np.float32)
    return (images - 128.0) / 128.0


@pytest.fixture(scope="module")
def served(exports, tmp_path_factory) -> dict:
    """Every export run on the test split in one subprocess that imports only TensorFlow; its outputs."""
    work_dir = tmp_path_factory.mktemp("serve")
    images_path, output_path = str(work_dir / "images.npz"), str(work_dir / "served.npz")
    np.savez(images_path, images=preprocessed_test_images())
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    arguments = [item for precision in PRECISIONS for item in (precision, *exports[precision])]
    process = subprocess.run(
        [sys.executable, "-c", SERVE_SCRIPT, images_path, output_path, *arguments],
        capture_output=True, text=True, env=dict(env, TF_CPP_MIN_LOG_LEVEL="2"), cwd=str(work_dir), timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    with np.load(output_path) as outputs:
        return {key: outputs[key] for key in outputs.files}


@pytest.fixture(scope="module")
def eval_script_accuracy(lenet_dir, tmp_path_factory) -> dict:
    """Top-1 that scripts/eval_image_classifier.py reports for the checkpoint, per --precision."""
    accuracy = {}
    for precision in PRECISIONS:
        eval_dir = str(tmp_path_factory.mktemp(f"eval_{precision}"))
        check_ok(run_script(
            EVAL_SCRIPT, f"--checkpoint_path={lenet_dir}", f"--eval_dir={eval_dir}", *LENET,
            "--dataset_split_name=test", "--batch_size=500", f"--precision={precision}",
        ))
        with open(os.path.join(eval_dir, "metrics.json"), encoding="utf-8") as handle:
            accuracy[precision] = json.load(handle)["accuracy"]
    return accuracy


def test_exports_are_served_by_tensorflow_alone_with_float32_input_and_outputs(served):
    assert list(served["forbidden"]) == []
    for precision in PRECISIONS:
        assert str(served[f"{precision}_input_dtype"]) == "float32"
        assert served[f"{precision}_frozen_logits"].dtype == np.float32
        assert served[f"{precision}_served_logits"].dtype == np.float32
        np.testing.assert_allclose(served[f"{precision}_served_probabilities"].sum(axis=1), 1.0, rtol=1e-5)
        np.testing.assert_array_equal(served[f"{precision}_served_classes"], served[f"{precision}_frozen_classes"])


def test_float32_exports_match_the_eval_script_top1_exactly(served, eval_script_accuracy):
    expected_correct = round(eval_script_accuracy["float32"] * len(TEST_LABELS))
    for key in ("float32_frozen_classes", "float32_served_classes"):
        assert int(np.sum(served[key] == TEST_LABELS)) == expected_correct, key


def test_bfloat16_export_is_at_most_055_of_float32_and_within_half_a_point(exports, served, eval_script_accuracy):
    float32_size, bfloat16_size = (os.path.getsize(exports[precision][0]) for precision in PRECISIONS)
    assert bfloat16_size <= MAX_BFLOAT16_SIZE_RATIO * float32_size, (bfloat16_size, float32_size)
    accuracy = float(np.mean(served["bfloat16_frozen_classes"] == TEST_LABELS))
    for precision in PRECISIONS:
        reference = eval_script_accuracy[precision]
        assert abs(accuracy - reference) <= BFLOAT16_TOP1_TOLERANCE, (precision, accuracy, reference)


def test_bfloat16_frozen_weights_are_bfloat16_constants_and_no_variables_remain(exports):
    graph_def = tf1.GraphDef()
    with open(exports["bfloat16"][0], "rb") as handle:
        graph_def.ParseFromString(handle.read())
    nodes = {node.name: node for node in graph_def.node}
    assert not [n.op for n in graph_def.node if n.op in ("VariableV2", "VarHandleOp", "ReadVariableOp")]
    weight_inputs = [nodes[node.input[1].split(":")[0]] for node in graph_def.node if node.op in ("Conv2D", "MatMul")]
    assert len(weight_inputs) == 4  # LeNet: conv1, conv2, fc3, fc4
    assert all(n.op == "Const" and n.attr["dtype"].type == tf.bfloat16.as_datatype_enum for n in weight_inputs)


def test_without_checkpoint_writes_the_official_graph_with_variables_as_text(tmp_path):
    output = tmp_path / "lenet_graph.pbtxt"
    export_model(ExportConfig(model_name="lenet", dataset_name="fashion_mnist", output_file=str(output),
                              write_text_graphdef=True), print_line=lambda line: None)
    from google.protobuf import text_format

    graph_def = text_format.Parse(output.read_text(), tf1.GraphDef())
    placeholder = next(node for node in graph_def.node if node.name == "input")
    assert placeholder.op == "Placeholder"
    assert [dim.size for dim in placeholder.attr["shape"].shape.dim] == [-1, 28, 28, 1]  # LeNet on grayscale data
    assert any(node.op in ("VariableV2", "VarHandleOp") for node in graph_def.node)


def _config(**overrides) -> ExportConfig:
    return ExportConfig(**{"model_name": "lenet", "dataset_name": "fashion_mnist", **overrides})


@pytest.mark.parametrize("overrides, expected", [
    ({"model_name": "lenett"}, "--model_name='lenett' is not a known network (did you mean 'lenet'"),
    ({"quantize": True}, "--quantize writes an int8 TensorFlow Lite model: pass --output_file=model.tflite"),
    ({"output_file": ""}, "--output_file is empty"),
])
def test_bad_options_are_refused_before_any_work(overrides, expected, tmp_path):
    config = _config(**{"output_file": str(tmp_path / "g.pb"), **overrides})
    with pytest.raises(ValueError) as raised:
        export_model(config, print_line=lambda line: None)
    assert expected in str(raised.value)


def test_checkpoint_of_another_model_is_named(lenet_dir, tmp_path):
    config = _config(model_name="cifarnet", checkpoint_path=lenet_dir, output_file=str(tmp_path / "g.pb"),
                     precision_options=PrecisionOptions("bfloat16"))
    with pytest.raises(ValueError) as raised:
        export_model(config, print_line=lambda line: None)
    assert "does not hold the variables of --model_name=cifarnet" in str(raised.value)
    assert not (tmp_path / "g.pb").exists()


def test_unwritable_output_is_one_error_line_with_exit_status_2(lenet_dir, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    process = run_script(EXPORT_SCRIPT, *LENET, f"--checkpoint_path={lenet_dir}",
                         f"--output_file={blocker}/graph.pb")
    assert process.returncode == 2
    errors = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert errors == [process.stderr.strip().splitlines()[-1]]
    assert errors[0].startswith(f"error: --output_file={blocker}/graph.pb cannot be written")


def test_existing_saved_model_dir_is_refused(lenet_dir, exports, tmp_path):
    config = _config(checkpoint_path=lenet_dir, saved_model_dir=exports["float32"][1])
    with pytest.raises(ValueError) as raised:
        export_model(config, print_line=lambda line: None)
    assert "already exists; pass a new folder" in str(raised.value)


def _run_frozen(path: str, images: np.ndarray) -> np.ndarray:
    graph_def = tf1.GraphDef()
    with open(path, "rb") as handle:
        graph_def.ParseFromString(handle.read())
    with tf.Graph().as_default() as graph:
        tf1.import_graph_def(graph_def, name="")
        with tf1.Session(graph=graph) as session:
            return session.run("logits:0", {"input:0": images})


def test_float16_export_stores_float16_weights_and_stays_close_to_float32(lenet_dir, exports, tmp_path):
    output = str(tmp_path / "lenet_float16.pb")
    export_model(_config(checkpoint_path=lenet_dir, output_file=output, precision_options=PrecisionOptions("float16")),
                 print_line=lambda line: None)
    graph_def = tf1.GraphDef()
    with open(output, "rb") as handle:
        graph_def.ParseFromString(handle.read())
    nodes = {node.name: node for node in graph_def.node}
    weights = [nodes[node.input[1].split(":")[0]] for node in graph_def.node if node.op in ("Conv2D", "MatMul")]
    assert weights and all(n.attr["dtype"].type == tf.float16.as_datatype_enum for n in weights)
    images = preprocessed_test_images()[:64]
    float16_logits, float32_logits = _run_frozen(output, images), _run_frozen(exports["float32"][0], images)
    assert float16_logits.dtype == np.float32
    scale = np.abs(float32_logits).max()
    np.testing.assert_allclose(float16_logits, float32_logits, atol=0.01 * scale)  # float16: ~3 decimal digits
