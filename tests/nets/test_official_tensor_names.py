"""Every end point and the logits carry the tensor name the official graph gives them.

``tests/data/official_tensor_names.json.gz`` holds, per network of the official ``nets_factory``,
``{"end_points": {end point: tensor name}, "logits": tensor name}``, measured by building the
official TF-Slim sources under TensorFlow 2.21 in graph mode with ``is_training=False``, batch 1,
the official class count and default image size. Users fetch these names
(``graph.get_tensor_by_name('MobilenetV2/Logits/AvgPool:0')``) and freeze by them
(``--output_node_names=InceptionV3/Predictions/Reshape_1``), so each build here is made the same way
and compared name by name. Dropout tensors are named differently in training mode, so these builds
cannot share the variable tests' training-mode builds.
"""

import functools
import gzip
import json
import os

import pytest
import tensorflow as tf
from reference import load_reference, network_params

from nets import nets_factory

TENSOR_NAMES_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                 "data", "official_tensor_names.json.gz")


@functools.lru_cache(maxsize=1)
def load_tensor_names() -> dict:
    """The official tensor names, keyed by network name."""
    with gzip.open(TENSOR_NAMES_PATH, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def _eval_build_names(name: str, input_shape: list) -> tuple:
    """``(logits name, {end point: tensor name})`` of the factory's evaluation build of ``name``."""
    num_classes = load_reference()[name]["num_classes"]
    with tf.Graph().as_default():
        network_fn = nets_factory.get_network_fn(name, num_classes, is_training=False)
        logits, end_points = network_fn(tf.compat.v1.placeholder(tf.float32, input_shape))
        return logits.name, {key: tensor.name for key, tensor in end_points.items()}


def test_the_table_covers_every_official_network_and_its_end_points():
    variables = load_reference()
    names = load_tensor_names()
    assert sorted(names) == sorted(variables)
    for name, entry in names.items():
        training_only = set(variables[name]["end_points_only_when_training"])
        assert set(entry["end_points"]) == set(variables[name]["end_points"]) - training_only, name
        assert entry["logits"] == variables[name]["logits_name"], name


# The factory's cut (``reference.network_params``): the large networks and the width variants run with the slow tests.
@pytest.mark.parametrize("name", network_params(sorted(load_tensor_names())))
def test_end_points_and_logits_have_the_official_tensor_names(name):
    official = load_tensor_names()[name]
    logits_name, built = _eval_build_names(name, load_reference()[name]["input_shape"])
    wrong = {key: (built.get(key), tensor_name) for key, tensor_name in official["end_points"].items()
             if built.get(key) != tensor_name}
    assert not wrong, f"{name}: end points named differently (ours, official): {wrong}"
    assert logits_name == official["logits"], name


@pytest.mark.parametrize("name", ["mobilenet_v2", "mobilenet_v3_small"])
def test_mobilenet_features_keep_the_official_name_at_unknown_sizes(name):
    """Unknown height and width pool by ``reduce_mean``; the features keep the fetched name all the same."""
    _, built = _eval_build_names(name, [None, None, None, 3])
    assert built["global_pool"] == load_tensor_names()[name]["end_points"]["global_pool"]
