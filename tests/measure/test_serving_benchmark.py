"""The serving benchmark: scripts/benchmark_serving.py on LeNet as a user runs it, given files, bad input, AMP.

No timing is asserted: only what the reports hold (every variant at every batch size, sizes equal
to the files', ratios and percentiles recomputed from the per-request times with timing.py's and
the standard library's functions), what is left n/a and why, and the errors.
"""

import dataclasses
import itertools
import json
import os
import statistics

import matplotlib.image
import numpy as np
import pytest
import tensorflow as tf

from script_runs import REPO_ROOT, check_bad_input, check_ok, run_script
from slim_mp.config_fields import ArgumentError
from slim_mp.devices import detect_device, precision_support
from slim_mp.export.saved_model import write_saved_model
from slim_mp.measure.benchmark import serving, serving_options
from slim_mp.measure.benchmark.served_models import (FROZEN_GRAPH, SAVED_MODEL, ServedModel, initial_weights_checkpoint,
                                                     load_served_model)
from slim_mp.measure.benchmark.serving_options import ServingOptions, ServingVariant, check_serving_options
from slim_mp.timing import paired_ratio, relative_noise

tf1 = tf.compat.v1
SCRIPT = os.path.join(REPO_ROOT, "scripts", "benchmark_serving.py")
BATCH_SIZES = (1, 2)
ROUNDS = 3
EXPORTED_KEYS = {"float32", "slim_mp_bf16", "float32_saved_model", "slim_mp_bf16_saved_model", "grappler_bf16"}


def folder_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(folder, name)) for folder, _, names in os.walk(path) for name in names)


def write_tiny_graph(folder: str, batch_size=None, with_probabilities: bool = True) -> str:
    """A frozen graph with the export's names (a convolution and a matrix product), not made by the exporter."""
    graph = tf.Graph()
    rng = np.random.RandomState(0)
    with graph.as_default():
        images = tf1.placeholder(tf.float32, [batch_size, 8, 8, 3], name="input")
        features = tf.nn.relu(tf.nn.conv2d(images, tf.constant(rng.randn(3, 3, 3, 4).astype(np.float32)), 1, "SAME"))
        logits = tf.identity(tf.matmul(tf.reshape(features, [-1, 256]), tf.constant(rng.randn(256, 5).astype(
            np.float32))), name="logits")
        if with_probabilities:
            tf.nn.softmax(logits, name="probabilities")
        tf.argmax(logits, axis=-1, name="classes")
    tf.io.write_graph(graph.as_graph_def(), folder, "tiny.pb", as_text=False)
    return os.path.join(folder, "tiny.pb")


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory):
    """Paths of the tiny graph (open batch): ``graph``, ``saved_model``, and ``other_signature``, a SavedModel
    of it whose only signature is not ``serving_default``."""
    folder = str(tmp_path_factory.mktemp("tiny"))
    graph_file = write_tiny_graph(folder)
    graph_def = tf1.GraphDef()
    with open(graph_file, "rb") as handle:
        graph_def.ParseFromString(handle.read())
    write_saved_model(graph_def, os.path.join(folder, "saved_model"))
    graph = tf.Graph()
    with graph.as_default(), tf1.Session(graph=graph) as session:
        tf.graph_util.import_graph_def(graph_def, name="")
        signature = tf1.saved_model.signature_def_utils.predict_signature_def(
            {"images": graph.get_tensor_by_name("input:0")}, {"logits": graph.get_tensor_by_name("logits:0")})
        builder = tf1.saved_model.Builder(os.path.join(folder, "other_signature"))
        builder.add_meta_graph_and_variables(session, [tf1.saved_model.SERVING], signature_def_map={"other": signature})
        builder.save()
    return dict(graph=graph_file, saved_model=os.path.join(folder, "saved_model"),
                other_signature=os.path.join(folder, "other_signature"))


@pytest.fixture(scope="module")
def exported_run(tmp_path_factory):
    """One run of the script on LeNet, exporting float32 and bfloat16 from fresh weights: (stdout, output dir).

    8x8 images keep LeNet's fully connected layer, and so the files, small (1.3 MB in float32).
    """
    output_dir = str(tmp_path_factory.mktemp("serving"))
    process = check_ok(run_script(
        SCRIPT, "--model_name=lenet", "--dataset_name=fashion_mnist", "--image_size=8", "--precisions=bfloat16",
        f"--batch_sizes={','.join(map(str, BATCH_SIZES))}", f"--rounds={ROUNDS}", "--warmup=1",
        f"--output_dir={output_dir}"))
    return process.stdout, output_dir


@pytest.fixture(scope="module")
def payload(exported_run):
    with open(os.path.join(exported_run[1], "serving.json"), encoding="utf-8") as handle:
        return json.load(handle)


def check_ratios_and_percentiles(results) -> None:
    """Every timed result's figures, recomputed from its per-request times and its float32 reference's."""
    reference = {(r["format"], r["batch_size"]): r for r in results if r["verdict"] == serving.REFERENCE}
    for row in results:
        if row["unavailable"]:
            continue
        times, base = row["step_ms"], reference[(row["format"], row["batch_size"])]["step_ms"]
        assert len(times) == ROUNDS and min(times) > 0
        assert row["p50_ms"] == pytest.approx(statistics.median(times))
        assert row["p99_ms"] == pytest.approx(statistics.quantiles(times, n=100, method="inclusive")[98])
        assert row["images_per_second"] == pytest.approx(row["batch_size"] * 1000.0 / row["p50_ms"])
        assert row["speedup_vs_float32"] == pytest.approx(paired_ratio(base, times))
        assert row["noise"] == pytest.approx(relative_noise(times, base))


def test_every_variant_is_reported_at_every_batch_size(payload):
    results = payload["results"]
    assert sorted((r["key"], r["batch_size"]) for r in results) == sorted(itertools.product(EXPORTED_KEYS,
                                                                                            BATCH_SIZES))
    timed = {r["key"] for r in results if not r["unavailable"]}
    assert timed >= EXPORTED_KEYS - {"grappler_bf16"}, "float32 and the bfloat16 exports always run"
    for row in results:  # AMP that changes nothing on this CPU is reported as such, at every batch size
        if row["unavailable"]:
            assert row["key"] == "grappler_bf16" and row["unavailable"].startswith("not honoured here: grappler's")
    check_ratios_and_percentiles(results)
    assert {r["verdict"] for r in results if r["label"] == "float32"} == {serving.REFERENCE}
    assert payload["options"]["batch_sizes"] == list(BATCH_SIZES)


def test_the_sizes_are_those_of_the_exported_files(exported_run, payload):
    exports = os.path.join(exported_run[1], serving_options.EXPORTS_FOLDER)
    models = {(m["precision"], m["format"]): m for m in payload["models"]}
    assert set(models) == {(p, f) for p in ("float32", "bfloat16") for f in (FROZEN_GRAPH, SAVED_MODEL)}
    for precision in ("float32", "bfloat16"):
        assert models[(precision, FROZEN_GRAPH)]["size_bytes"] == os.path.getsize(os.path.join(exports,
                                                                                                f"{precision}.pb"))
        assert models[(precision, SAVED_MODEL)]["size_bytes"] == folder_bytes(os.path.join(
            exports, f"{precision}_saved_model"))
    # bfloat16 weights take half the bytes of float32 ones (LeNet is almost all weights)
    assert models[("bfloat16", FROZEN_GRAPH)]["size_bytes"] < 0.55 * models[("float32", FROZEN_GRAPH)]["size_bytes"]
    for row in payload["results"]:
        exported = "float32" if row["label"] in ("float32", "grappler_bf16") else "bfloat16"
        assert row["file_bytes"] == models[(exported, row["format"])]["size_bytes"]


def test_fresh_weights_are_said_so(exported_run, payload):
    assert payload["fresh_weights"] is True and payload["weights"] == serving.FRESH_WEIGHTS
    assert f"weights: {serving.FRESH_WEIGHTS}" in exported_run[0]
    with open(os.path.join(exported_run[1], "serving.md"), encoding="utf-8") as handle:
        assert f"Weights: {serving.FRESH_WEIGHTS}." in handle.read()


def test_markdown_has_the_sizes_and_one_row_per_batch_and_variant(exported_run, payload):
    with open(os.path.join(exported_run[1], "serving.md"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| batch |"))
    rows = [line.strip("|").split("|") for line in itertools.takewhile(lambda line: line.startswith("|"),
                                                                           lines[header + 2:])]
    assert sorted((int(r[0]), r[1].strip(), r[2].strip()) for r in rows) == sorted(
        (r["batch_size"], r["label"], r["format"]) for r in payload["results"])
    assert all(len(r) == len(lines[header].strip("|").split("|")) for r in rows)
    sizes = next(i for i, line in enumerate(lines) if line.startswith("| precision | format | bytes"))
    assert len(list(itertools.takewhile(lambda line: line.startswith("|"), lines[sizes + 2:]))) == 4


def test_the_plot_is_an_image(exported_run):
    image = matplotlib.image.imread(os.path.join(exported_run[1], "serving.png"))
    assert image.ndim == 3 and min(image.shape[:2]) > 100


def test_existing_files_are_timed_as_given(tiny_files, tmp_path):
    graph_file, saved_model = tiny_files["graph"], tiny_files["saved_model"]
    options, given = check_serving_options(ServingOptions(
        frozen_graphs=(f"float32:{graph_file}",), saved_models=(f"fp32:{saved_model}",), precisions=(),
        batch_sizes=(3,), rounds=ROUNDS, warmup=0, output_dir=str(tmp_path)))
    assert [(m.precision, m.format, m.size_bytes) for m in given] == [
        ("float32", FROZEN_GRAPH, os.path.getsize(graph_file)), ("float32", SAVED_MODEL, folder_bytes(saved_model))]
    assert given[0].input_shape == (None, 8, 8, 3)
    run = serving.run_serving_benchmark(options, given, lambda line: None)
    assert [(r.key, r.batch_size) for r in run.results] == [("float32", 3), ("float32_saved_model", 3)]
    check_ratios_and_percentiles([dict(vars(r)) for r in run.results])
    assert not os.path.exists(os.path.join(str(tmp_path), serving_options.EXPORTS_FOLDER)), "given files: no export"


def test_a_checkpoint_given_is_what_every_export_freezes(tmp_path):
    options = ServingOptions(model_name="lenet", dataset_name="fashion_mnist", image_size=8, precisions=(),
                             batch_sizes=(1,), rounds=1, warmup=0, output_dir=str(tmp_path / "out"))
    checkpoint = initial_weights_checkpoint(serving_options.export_config(options, None), str(tmp_path))
    options, given = check_serving_options(dataclasses.replace(options, checkpoint_path=checkpoint))
    run = serving.run_serving_benchmark(options, given, lambda line: None)
    assert run.weights == f"frozen from --checkpoint_path={checkpoint}"
    assert {(m.precision, m.format) for m in run.models} == {("float32", FROZEN_GRAPH), ("float32", SAVED_MODEL)}
    graph_def = tf1.GraphDef()
    with open(os.path.join(options.output_dir, serving_options.EXPORTS_FOLDER, "float32.pb"), "rb") as handle:
        graph_def.ParseFromString(handle.read())
    constants = {node.name: tf.make_ndarray(node.attr["value"].tensor) for node in graph_def.node if node.op == "Const"}
    reader = tf.train.load_checkpoint(checkpoint)
    weights = [name for name in reader.get_variable_to_shape_map() if name.endswith("weights")]
    assert weights and all(np.array_equal(constants[name], reader.get_tensor(name)) for name in weights)


def test_a_graph_exported_for_one_batch_is_timed_only_there(tmp_path):
    graph_file = write_tiny_graph(str(tmp_path), batch_size=2)
    model = ServedModel("float32", FROZEN_GRAPH, graph_file, os.path.getsize(graph_file), (2, 8, 8, 3))
    results = serving.time_variants([ServingVariant(model)], ServingOptions(batch_sizes=(1, 2), rounds=1, warmup=0),
                                    lambda line: None)
    assert [(r.batch_size, r.unavailable) for r in results] == [(1, "exported for batch 2 only (--batch_size)"),
                                                                (2, None)]


def test_each_request_feeds_host_memory_and_fetches_the_probabilities(tiny_files):
    model = ServedModel("float32", FROZEN_GRAPH, tiny_files["graph"], 0, (None, 8, 8, 3))
    loaded = load_served_model(model)
    try:
        images = serving.random_images(model.input_shape, 4)
        probabilities = loaded.predictor()(images)
    finally:
        loaded.session.close()
    assert images.shape == (4, 8, 8, 3) and images.dtype == np.float32 and -1 <= images.min() < images.max() <= 1
    assert probabilities.shape == (4, 5) and np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)


@pytest.mark.executed_ops
def test_grappler_amp_is_timed_where_it_converts_and_reported_where_the_cpu_cannot_honour_it(tiny_files):
    model = ServedModel("float32", FROZEN_GRAPH, tiny_files["graph"], 0, (None, 8, 8, 3))
    results = serving.time_variants([ServingVariant(model), ServingVariant(model, "bfloat16")],
                                    ServingOptions(batch_sizes=(1,), rounds=1, warmup=0), lambda line: None)
    amp = results[1]
    device = detect_device()
    if precision_support(device)["bfloat16"].native:
        assert amp.unavailable is None and amp.low_ops_run == amp.compute_ops_run == 2
    elif not device.onednn:  # grappler's oneDNN bfloat16 AMP rewrites nothing without oneDNN
        assert amp.unavailable == ("not honoured here: grappler's auto_mixed_precision_onednn_bfloat16 ran none of "
                                   "the 2 conv/matmul ops in bfloat16")
    assert results[0].low_ops_run == 0 and results[0].compute_ops_run == 2


@pytest.mark.parametrize("speedup, noise, expected", [
    (1.5, 0.02, "faster"), (0.8, 0.02, "slower"), (1.005, 0.0, "within noise"), (1.05, 0.1, "within noise"),
    (0.9, 0.05, "slower"),
])
def test_the_verdict_is_the_noise_rules(speedup, noise, expected):
    assert serving.verdict(speedup, noise) == expected


@pytest.mark.parametrize("kwargs, expected", [
    (lambda p: dict(batch_sizes=(1, 0)), "batch_sizes=1,0 must list batch sizes of at least 1"),
    (lambda p: dict(batch_sizes=(8, 8)), "batch_sizes lists a batch size twice"),
    (lambda p: dict(precisions=("int8",)), "precisions=int8: Unknown precision 'int8'"),
    (lambda p: dict(precisions=("float32",)), "precisions=float32: 'float32' is not a mixed precision"),
    (lambda p: dict(model_name=None), "model_name is unset"),
    (lambda p: dict(model_name="resnet_v1_5"), "--model_name"),
    (lambda p: dict(rounds=0), "rounds=0 must be at least 1"),
    (lambda p: dict(frozen_graphs=("float32:/no/such/file.pb",)),
     "frozen_graphs=float32:/no/such/file.pb: /no/such/file.pb does not exist"),
    (lambda p: dict(frozen_graphs=("model.pb",)), "frozen_graphs=model.pb is not precision:path"),
    (lambda p: dict(frozen_graphs=(f"int8:{p['graph']}",)), "frozen_graphs=int8:"),
    (lambda p: dict(frozen_graphs=(f"bfloat16:{p['graph']}",)), "frozen_graphs has no float32 model"),
    (lambda p: dict(frozen_graphs=(f"float32:{p['graph']}", f"fp32:{p['graph']}")),
     "frozen_graphs names float32 twice"),
    (lambda p: dict(frozen_graphs=(f"float32:{p['not_a_graph']}",)), "is not a GraphDef (binary or text)"),
    (lambda p: dict(frozen_graphs=(f"float32:{p['no_probabilities']}",)), "has no node 'probabilities'"),
    (lambda p: dict(frozen_graphs=(f"float32:{p['saved_model']}",)), "is a folder; pass the frozen graph's .pb"),
    (lambda p: dict(saved_models=(f"float32:{p['graph']}",)), "is not a SavedModel folder (no saved_model.pb)"),
    (lambda p: dict(saved_models=(f"float32:{p['other_signature']}",)),
     "has no 'serving_default' signature from 'images' to 'probabilities'"),
    (lambda p: dict(frozen_graphs=(f"float32:{p['graph']}",), checkpoint_path="ckpt"),
     "checkpoint_path shapes the exports this run would make"),
    (lambda p: dict(saved_models=(f"float32:{p['saved_model']}",), image_size=96), "image_size shapes the exports"),
    (lambda p: dict(frozen_graphs=(f"float32:{p['graph']}",), precisions=("bfloat16",), dataset_name="cifar10"),
     "dataset_name shapes the exports"),
    (lambda p: dict(checkpoint_path=p["graph"]), "checkpoint_path=/"),
])
def test_bad_input_names_the_argument(kwargs, expected, tiny_files, tmp_path):
    not_a_graph = tmp_path / "notes.pb"
    not_a_graph.write_text("not a graph {")
    no_probabilities = write_tiny_graph(str(tmp_path), with_probabilities=False)
    paths = dict(tiny_files, not_a_graph=str(not_a_graph), no_probabilities=no_probabilities)
    options = ServingOptions(**{"model_name": "lenet", "output_dir": str(tmp_path / "out"), **kwargs(paths)})
    with pytest.raises(ValueError) as raised:
        check_serving_options(options)
    assert expected in str(raised.value)
    assert not os.path.exists(tmp_path / "out")


def test_a_second_run_into_the_same_folder_is_refused_before_exporting(exported_run):
    options = ServingOptions(model_name="lenet", output_dir=exported_run[1])
    with pytest.raises(ArgumentError, match="holds exports/ of an earlier run"):
        check_serving_options(options)


@pytest.mark.parametrize("arguments, expected_start", [
    (("--model_name=lenet", "--batch_sizes=0"), "error: --batch_sizes=0 must list batch sizes of at least 1"),
    (("--frozen_graphs=float32:{missing}",), "error: --frozen_graphs=float32:{missing}: {missing} does not exist"),
    (("--frozen_graphs=float32:{graph}", "--precisions=bfloat8"), "error: --precisions=bfloat8: Unknown precision"),
])
def test_the_script_reports_bad_input_in_one_line_and_writes_nothing(arguments, expected_start, tiny_files,
                                                                      tmp_path):
    paths = dict(tiny_files, missing=str(tmp_path / "missing.pb"))
    output_dir = tmp_path / "out"
    process = run_script(SCRIPT, *(a.format(**paths) for a in arguments), f"--output_dir={output_dir}")
    check_bad_input(process, expected_start.format(**paths))
    assert not os.path.exists(output_dir)
