"""TensorBoard as TF-Slim users know it: the rewritten graph, histograms, sparsity, eval scalars, read from events
files."""

import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from script_runs import EVAL_SCRIPT, LENET_ARGS, TRAIN_SCRIPT, check_ok, run_script
from slim_mp.datasets import get_dataset
from slim_mp.datasets.fashion_mnist import load_bundled
from slim_mp.training.input_pipeline import InputOptions, make_fed_iterator, make_iterator
from slim_mp.training.train_graph import _finite_values

tf1 = tf.compat.v1
STEPS = 4
TRAIN_IMAGES, _ = load_bundled("train")
LENET_END_POINTS = ("conv1", "pool1", "conv2", "pool2", "fc3", "Logits")
LENET_VARIABLES = ("LeNet/conv1/weights", "LeNet/conv2/biases", "LeNet/fc4/weights")


def train(train_dir: str, *args: str) -> None:
    check_ok(run_script(
        TRAIN_SCRIPT, f"--train_dir={train_dir}", f"--max_number_of_steps={STEPS}", "--save_summaries_secs=0",
        "--log_every_n_steps=100", *LENET_ARGS, *args,
    ))


def read_events(folder: str) -> list:
    files = glob.glob(os.path.join(folder, "events.out.tfevents.*"))
    assert len(files) == 1, files
    return list(tf1.train.summary_iterator(files[0]))


def summaries_by_tag(events: list) -> dict:
    """{tag: [(step, value)]} where value is a float for scalars and a HistogramProto for histograms."""
    found = {}
    for event in events:
        for value in event.summary.value:
            kind = value.WhichOneof("value")
            found.setdefault(value.tag, []).append((event.step, value.histo if kind == "histo" else value.simple_value))
    return found


@pytest.fixture(scope="module")
def bfloat16_run(tmp_path_factory):
    train_dir = str(tmp_path_factory.mktemp("tensorboard") / "bf16")
    train(train_dir, "--precision=bfloat16")
    return train_dir


def test_events_file_holds_the_rewritten_training_graph_without_the_dataset(bfloat16_run):
    graph_events = [event for event in read_events(bfloat16_run) if event.graph_def]
    assert len(graph_events) == 1
    graph_def = tf1.GraphDef()
    graph_def.ParseFromString(graph_events[0].graph_def)
    nodes = {node.name: node for node in graph_def.node}
    rebuilt = nodes["LeNet/conv1/Conv2D_bf16"]  # the pass's low-precision copy of the first convolution
    assert rebuilt.op == "Conv2D" and rebuilt.attr["T"].type == tf.bfloat16.as_datatype_enum
    assert nodes["fed_images"].op == "Placeholder"
    # The 10k bundled training images alone are 7.8 MB; the whole graph must be far smaller than them.
    assert len(graph_events[0].graph_def) < TRAIN_IMAGES.nbytes / 10
    assert max(len(node.SerializeToString()) for node in graph_def.node) < 100_000


def test_official_summaries_and_mixed_precision_scalars_are_written(bfloat16_run):
    tags = summaries_by_tag(read_events(bfloat16_run))
    for end_point in LENET_END_POINTS:
        histogram = tags[f"summaries/activations/{end_point}"][-1][1]
        assert histogram.num > 0 and histogram.min <= histogram.max
        sparsity = tags[f"summaries/sparsity/{end_point}"][-1][1]
        assert 0.0 <= sparsity <= 1.0
    assert 0.2 < tags["summaries/sparsity/conv1"][-1][1] < 1.0  # a ReLU output: some zeros, not all
    for variable in LENET_VARIABLES:
        histogram = tags[f"summaries/{variable}"][-1][1]
        expected = tf.train.load_checkpoint(tf.train.latest_checkpoint(bfloat16_run)).get_tensor(variable)
        assert histogram.num == expected.size
    for scalar in ("summaries/total_loss", "summaries/learning_rate", "summaries/losses/regularization"):
        assert scalar in tags
    assert [value for _, value in tags["LossScaleOptimizer/skipped_steps"]] == [0.0] * len(
        tags["LossScaleOptimizer/skipped_steps"])
    assert any(tag.startswith("LossScaleOptimizer/loss_scale") for tag in tags)
    fraction = tags["summaries/mixed_precision/low_precision_op_fraction"][-1][1]
    assert 0.0 < fraction <= 1.0
    steps = [step for step, _ in tags["summaries/total_loss"]]
    assert steps[-1] == STEPS and steps == sorted(steps)


def test_histograms_summarise_the_finite_values_in_their_order():
    """An overflowing activation must not fail the summary step: its histogram takes the finite values only."""
    values = np.array([[1.5, np.inf], [np.nan, -2.0], [-np.inf, 3.0]], np.float32)
    with tf.Graph().as_default(), tf1.Session() as session:
        kept = session.run(_finite_values(tf.constant(values)))
    np.testing.assert_array_equal(kept, values[np.isfinite(values)])


def test_histogram_flag_off_keeps_the_scalars_only(tmp_path):
    train_dir = str(tmp_path / "no_histograms")
    train(train_dir, "--histogram_summaries=false")
    events = read_events(train_dir)
    kinds = {value.WhichOneof("value") for event in events for value in event.summary.value}
    assert kinds == {"simple_value"}
    tags = summaries_by_tag(events)
    assert "summaries/sparsity/conv1" in tags and "summaries/total_loss" in tags
    assert "summaries/mixed_precision/low_precision_op_fraction" not in tags  # float32: nothing rewritten


def test_eval_writes_its_metrics_as_scalars_at_the_checkpoint_step(bfloat16_run, tmp_path):
    eval_dir = str(tmp_path / "eval")
    check_ok(run_script(
        EVAL_SCRIPT, f"--checkpoint_path={bfloat16_run}", f"--eval_dir={eval_dir}", "--dataset_name=fashion_mnist",
        "--model_name=lenet", "--dataset_split_name=test", "--batch_size=500", "--max_num_batches=2",
    ))
    with open(os.path.join(eval_dir, "metrics.json"), encoding="utf-8") as handle:
        metrics = json.load(handle)
    tags = summaries_by_tag(read_events(eval_dir))
    assert tags["eval/Accuracy"] == [(STEPS, pytest.approx(metrics["accuracy"]))]
    assert tags["eval/Recall_5"] == [(STEPS, pytest.approx(metrics["top5"]))]
    assert tags["eval/loss"] == [(STEPS, pytest.approx(metrics["loss"]))]


def test_fed_iterator_reads_the_same_batches_as_the_one_shot_iterator():
    def first_batches(make) -> list:
        with tf.Graph().as_default():
            spec = get_dataset("fashion_mnist", "test")
            options = InputOptions(batch_size=300, image_size=28, is_training=False, num_preprocessing_threads=1)
            iterator, feed = make(spec, options)
            batch = iterator.get_next()
            with tf1.Session() as session:
                if feed is not None:
                    feed.initialize(session)
                return [session.run(batch) for _ in range(7)]  # 2000 = 6 full batches + 200

    def preprocess(image, height, width):
        return tf.cast(image, tf.float32)

    fed = first_batches(lambda spec, options: make_fed_iterator(spec, preprocess, options))
    one_shot = first_batches(lambda spec, options: (make_iterator(spec, preprocess, options), None))
    for (fed_images, fed_labels), (images, labels) in zip(fed, one_shot):
        np.testing.assert_array_equal(fed_images, images)
        np.testing.assert_array_equal(fed_labels, labels)
    assert len(fed[-1][1]) == 200
