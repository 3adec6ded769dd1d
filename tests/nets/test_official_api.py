"""Every official TF-Slim ``nets`` module path, public name and function signature exists here.

The official API is recorded as data in ``tests/nets/official_api/*.json`` (facts read from the
official tensorflow/models ``research/slim/nets`` sources: names, argument order and defaults), one
file per official module::

    {"module": "nets.resnet_utils",
     "functions": {"conv2d_same": ["inputs", "num_outputs", "kernel_size", "stride", "rate=1", "scope=None"]},
     "names": ["Block"]}

An argument is ``"name"`` (no default), ``"name=<Python literal>"`` (that default), ``"name=*"`` (a
default that is not a literal, such as ``tf.nn.relu``), ``"*args"`` or ``"**kwargs"``. ``names`` are
other public objects (classes, constants, conv-def tables) that must exist.
"""

import ast
import glob
import importlib
import inspect
import json
import os
from typing import List

import pytest

TABLE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "official_api")
TABLES = sorted(glob.glob(os.path.join(TABLE_DIR, "*.json")))


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def describe_parameters(function) -> List[str]:
    """``function``'s parameters in the table's notation (literal defaults shown by value)."""
    described = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind is parameter.VAR_POSITIONAL:
            described.append(f"*{parameter.name}")
        elif parameter.kind is parameter.VAR_KEYWORD:
            described.append(f"**{parameter.name}")
        elif parameter.default is parameter.empty:
            described.append(parameter.name)
        else:
            described.append(f"{parameter.name}={parameter.default!r}")
    return described


def signature_mismatch(expected: List[str], actual: List[str]) -> str:
    """Why ``actual`` (from ``describe_parameters``) differs from the table's ``expected``, or ``""``."""
    expected_names = [entry.split("=", 1)[0] for entry in expected]
    actual_names = [entry.split("=", 1)[0] for entry in actual]
    if expected_names != actual_names:
        return f"arguments {actual_names}, official {expected_names}"
    for official, ours in zip(expected, actual):
        if "=" not in official:
            if "=" in ours:
                return f"{ours} has a default, the official argument has none"
            continue
        if "=" not in ours:
            return f"{ours} has no default, official {official}"
        official_default = official.split("=", 1)[1]
        if official_default == "*":
            continue
        our_default = ours.split("=", 1)[1]
        try:
            same = ast.literal_eval(official_default) == ast.literal_eval(our_default)
        except (ValueError, SyntaxError):
            same = False
        if not same:
            return f"default {ours}, official {official}"
    return ""


def test_the_mismatch_check_can_fail():
    assert signature_mismatch(["a", "b=1"], ["a", "b=1"]) == ""
    assert signature_mismatch(["a", "b=*"], ["a", "b=<function relu>"]) == ""
    assert "arguments" in signature_mismatch(["a", "b=1"], ["b", "a=1"])
    assert "default" in signature_mismatch(["a", "b=1"], ["a", "b=2"])
    assert "no default" in signature_mismatch(["a", "b=1"], ["a", "b"])
    assert "has a default" in signature_mismatch(["a", "b"], ["a", "b=None"])


def test_the_table_covers_official_modules():
    assert len(TABLES) >= 1, f"no official API tables in {TABLE_DIR}"


@pytest.mark.parametrize("table_path", TABLES, ids=lambda path: os.path.basename(path)[:-len(".json")])
def test_official_module_has_the_official_api(table_path):
    table = _load(table_path)
    module = importlib.import_module(table["module"])
    missing = [name for name in [*table.get("functions", {}), *table.get("names", [])] if not hasattr(module, name)]
    assert not missing, f"{table['module']} lacks {missing}"
    problems = {}
    for name, expected in table.get("functions", {}).items():
        problem = signature_mismatch(expected, describe_parameters(getattr(module, name)))
        if problem:
            problems[name] = problem
    assert not problems, f"{table['module']}: {problems}"
