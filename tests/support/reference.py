"""The official TF-Slim variable tables (measured from tensorflow/models' nets), for layout tests.

``tests/data/official_slim_variables.json.gz`` holds, per network name of the
official ``nets_factory``: ``num_classes``, ``default_image_size``,
``input_shape`` and ``model_variables`` as ``[name, shape, dtype]`` lists
(built with ``is_training=True``).
"""

import functools
import gzip
import json
import os
from typing import Callable

import tensorflow as tf

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE_PATH = os.path.join(TESTS_DIR, "data", "official_slim_variables.json.gz")

BuildFn = Callable[[tf.Tensor, int], object]


@functools.lru_cache(maxsize=1)
def load_reference() -> dict:
    """Return the whole table, keyed by network name."""
    with gzip.open(REFERENCE_PATH, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def model_variable_layout(name: str, build: BuildFn) -> list:
    """Build ``build(images, num_classes)`` in a fresh graph; return ``[name, shape, dtype]`` of model variables."""
    entry = load_reference()[name]
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, entry["input_shape"])
        build(images, entry["num_classes"])
        model_vars = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.MODEL_VARIABLES)
        return [[v.op.name, v.shape.as_list(), v.dtype.base_dtype.name] for v in model_vars]


def assert_matches_reference(name: str, build: BuildFn) -> None:
    """Fail with a readable diff unless ``build`` creates exactly the official model variables.

    Checkpoints restore by name, so creation order is not compared.
    """
    expected = load_reference()[name]["model_variables"]
    actual = model_variable_layout(name, build)
    if sorted(actual) == sorted(expected):
        return
    expected_set = {(n, tuple(s), d) for n, s, d in expected}
    actual_set = {(n, tuple(s), d) for n, s, d in actual}
    missing = sorted(expected_set - actual_set)[:20]
    extra = sorted(actual_set - expected_set)[:20]
    raise AssertionError(
        f"{name}: model variables differ from the official layout "
        f"({len(actual)} built, {len(expected)} expected)\n"
        f"missing (first 20): {missing}\nunexpected (first 20): {extra}"
    )


def assert_official_outputs(name: str, build: BuildFn) -> None:
    """``assert_matches_reference`` plus the official end-point shapes and logits shape."""
    entry = load_reference()[name]
    built = {}

    def keep_outputs(images: tf.Tensor, num_classes: int):
        built["logits"], built["end_points"] = build(images, num_classes)
        return built["logits"], built["end_points"]

    assert_matches_reference(name, keep_outputs)
    shapes = {key: tensor.shape.as_list() for key, tensor in built["end_points"].items()}
    assert shapes == entry["end_point_shapes"]
    assert built["logits"].shape.as_list() == entry["logits_shape"]
