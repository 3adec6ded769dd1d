"""The official TF-Slim variable tables (measured from tensorflow/models' nets), for layout tests.

``tests/data/official_slim_variables.json.gz`` holds, per network name of the
official ``nets_factory``: ``num_classes``, ``default_image_size``,
``input_shape`` and ``model_variables`` as ``[name, shape, dtype]`` lists
(built with ``is_training=True``), ``end_points`` (in order), ``end_point_shapes``,
``logits_name``, ``logits_shape`` and ``other_global_variables``.

Building a network takes seconds, and several files check the same official layout (the factory
test for every name, each family's test for its own), so ``factory_build`` builds each name once
per test session and keeps only what the checks compare (no graph). The pytest-xdist workers of one
session run different files, so the result goes to a JSON file that the first worker to need a
name writes and the other reads (``session_builds.made_once``). ``network_params`` says which
names' builds the default suite makes and which wait for the slow tests.
"""

import dataclasses
import functools
import gzip
import json
import os
from typing import Callable, Dict, List, Optional, Sequence

import pytest
import tensorflow as tf

from nets import nets_factory
from session_builds import made_once

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE_PATH = os.path.join(TESTS_DIR, "data", "official_slim_variables.json.gz")

BuildFn = Callable[[tf.Tensor, int], object]
# Graph construction slows with the variable count (tf_keras checks every new variable against all
# existing ones), and the networks above this many model variables (101+ layer ResNets,
# Inception-v4, Inception-ResNet-v2, NASNets, PNASNets) take 7 to 30 s of CPU each to build: their
# per-network builds run with the slow tests.
SLOW_ABOVE_MODEL_VARIABLES = 500
# Width variants whose per-network builds run with the slow tests: each is the builder of a network
# built by default (the value) at another depth multiplier, so a default build already runs its code;
# tests/nets/test_nets_mobilenet_v2_v3.py also checks the MobileNet v2 and EdgeTPU variants' depths
# against the depth rule without building them. The smallest v1 (0.25) stays in the default builds
# for its min-depth rounding.
SLOW_WIDTH_VARIANTS = {
    "mobilenet_v1_050": "mobilenet_v1_025",
    "mobilenet_v1_075": "mobilenet_v1",
    "mobilenet_v2_140": "mobilenet_v2",
    "mobilenet_edgetpu_075": "mobilenet_edgetpu",
}


@functools.lru_cache(maxsize=1)
def load_reference() -> dict:
    """Return the whole table, keyed by network name."""
    with gzip.open(REFERENCE_PATH, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def network_params(names: Sequence[str]) -> list:
    """``names`` as pytest parameters of per-network builds, the large networks and the width variants slow."""
    return [
        pytest.param(name, marks=pytest.mark.slow)
        if load_reference()[name]["num_model_variables"] > SLOW_ABOVE_MODEL_VARIABLES or name in SLOW_WIDTH_VARIANTS
        else name
        for name in names
    ]


def _layout(variables) -> list:
    return [[v.op.name, v.shape.as_list(), v.dtype.base_dtype.name] for v in variables]


def model_variable_layout(name: str, build: BuildFn) -> list:
    """Build ``build(images, num_classes)`` in a fresh graph; return ``[name, shape, dtype]`` of model variables."""
    entry = load_reference()[name]
    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, entry["input_shape"])
        build(images, entry["num_classes"])
        return _layout(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.MODEL_VARIABLES))


def assert_matches_reference(name: str, build: BuildFn) -> None:
    """Fail with a readable diff unless ``build`` creates exactly the official model variables.

    Checkpoints restore by name, so creation order is not compared.
    """
    _assert_same_variables(name, model_variable_layout(name, build))


def _assert_same_variables(name: str, actual: list) -> None:
    expected = load_reference()[name]["model_variables"]
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


@dataclasses.dataclass(frozen=True)
class BuiltNetwork:
    """What one build of a network at its reference input shape shows, for comparison with the table."""

    model_variables: List[list]
    other_global_variables: List[list]
    end_points: List[str]
    end_point_shapes: Dict[str, list]
    logits_name: str
    logits_shape: list


def _build_with_factory(name: str) -> BuiltNetwork:
    """Build ``name`` through ``nets_factory`` (training mode) at its reference input shape."""
    entry = load_reference()[name]
    with tf.Graph().as_default():
        network_fn = nets_factory.get_network_fn(name, entry["num_classes"], is_training=True)
        logits, end_points = network_fn(tf.compat.v1.placeholder(tf.float32, entry["input_shape"]))
        model_variables = _layout(tf.compat.v1.model_variables())
        model_names = {variable_name for variable_name, _, _ in model_variables}
        other_globals = [row for row in _layout(tf.compat.v1.global_variables()) if row[0] not in model_names]
        return BuiltNetwork(
            model_variables=model_variables,
            other_global_variables=other_globals,
            end_points=list(end_points),
            end_point_shapes={key: tensor.shape.as_list() for key, tensor in end_points.items()},
            logits_name=logits.name,
            logits_shape=logits.shape.as_list(),
        )


@functools.lru_cache(maxsize=None)
def factory_build(name: str) -> BuiltNetwork:
    """``name``'s factory build, made once per test session (shared by the session's workers)."""

    def build(path: str) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(dataclasses.asdict(_build_with_factory(name)), handle)

    with open(made_once(f"{name}.json", build), encoding="utf-8") as handle:
        return BuiltNetwork(**json.load(handle))


def assert_factory_build_is_official(name: str, extra_end_points: Optional[Sequence[str]] = (),
                                     ordered_end_points: bool = False) -> None:
    """The factory's build of ``name`` has the official variables, end points, their shapes and the logits.

    ``extra_end_points`` are the end points this zoo adds to the official ones (``None``: any);
    ``ordered_end_points`` also compares the official end points' order.
    """
    entry = load_reference()[name]
    built = factory_build(name)
    _assert_same_variables(name, built.model_variables)
    assert built.other_global_variables == entry["other_global_variables"], name
    official = entry["end_points"]
    missing = [key for key in official if key not in built.end_point_shapes]
    assert not missing, f"{name}: official end points missing: {missing}"
    if extra_end_points is not None:
        assert sorted(set(built.end_points) - set(official)) == sorted(extra_end_points), name
    if ordered_end_points:
        assert [key for key in built.end_points if key in official] == official, name
    shapes = {key: built.end_point_shapes[key] for key in entry["end_point_shapes"]}
    assert shapes == entry["end_point_shapes"], name
    assert (built.logits_name, built.logits_shape) == (entry["logits_name"], entry["logits_shape"]), name


def assert_module_builds_official_outputs(name: str, network_fn: Callable, arg_scope_fn: Callable,
                                          **official_options) -> None:
    """``network_fn`` under ``arg_scope_fn`` builds the official ``name``.

    The factory must map ``name`` to exactly these two functions, so its (shared, cached) build is
    theirs; that build is then checked by ``assert_factory_build_is_official(name, **official_options)``.
    """
    assert nets_factory.networks_map[name] is network_fn, f"the factory's {name} is not {network_fn.__name__}"
    assert nets_factory.arg_scopes_map[name] is arg_scope_fn, f"the factory's {name} arg scope is not {arg_scope_fn}"
    assert_factory_build_is_official(name, **official_options)
