"""One decision's inputs (``context``): one frozen value instead of parameters threaded through the search."""

import ast
import dataclasses
import glob
import os

import pytest
import tensorflow as tf

from slim_mp.graph_pass import placement
from slim_mp.graph_pass.op_classes import default_classes
from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement import Candidate, OpTiming, PlacementOptions
from slim_mp.graph_pass.placement.candidate import all_float32_candidate
from slim_mp.graph_pass.placement.context import SearchContext
from slim_mp.graph_pass.placement.estimate import CastModel, Estimator
from slim_mp.graph_pass.placement.timing_cache import TimingCache
from slim_mp.graph_pass.region import select_region

from .fakes import conv_chain

MAX_PARAMETERS = 6


def _context(tmp_path):
    graph, loss = conv_chain(2)
    config = PaintConfig(tf.bfloat16, default_classes(tf.bfloat16), [], "CPU")
    timings = {"conv0": OpTiming(1.0, 0.5), "conv1": OpTiming(1.0, 0.5)}
    with graph.as_default():
        estimate = Estimator(select_region(loss), config, timings, CastModel(0.0, 0.0), 0.2)
    return SearchContext(config, PlacementOptions(), TimingCache(str(tmp_path), "a device", tf.bfloat16), estimate,
                         copy=None, why_not_copied="")


def test_the_context_is_frozen_and_tells_what_a_candidate_lowers(tmp_path):
    context = _context(tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.copy = None
    assert context.precision == "bfloat16"
    assert context.lowered(Candidate(frozenset({"conv1"}))) == {"conv0"}
    assert context.all_float32 == all_float32_candidate(["conv0", "conv1"])
    assert context.lowered(context.all_float32) == frozenset()


def _parameter_counts():
    folder = os.path.dirname(placement.__file__)
    for path in sorted(glob.glob(os.path.join(folder, "*.py"))):
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if isinstance(node, (ast.FunctionDef, ast.Lambda)):
                args = node.args
                count = (len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs) + (args.vararg is not None)
                         + (args.kwarg is not None))
                yield f"{os.path.basename(path)}:{node.lineno} {getattr(node, 'name', 'lambda')}", count


def test_no_placement_function_takes_more_than_six_parameters():
    counts = dict(_parameter_counts())
    assert len(counts) > 50, "the check reads the placement package"
    assert {name: count for name, count in counts.items() if count > MAX_PARAMETERS} == {}
