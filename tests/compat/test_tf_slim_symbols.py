"""Every ``module.attribute`` tf_slim reads through a TensorFlow-internal module exists after ``install()``.

The scan reads tf_slim's installed sources (library and the test files its wheel ships) with ``ast``:
for each ``from tensorflow.X import m`` / ``import tensorflow.X as m`` it collects the ``m.name``
attribute reads and resolves them against the running TensorFlow. A name TensorFlow moves in a
future release fails here, naming the file and line, before a user meets the AttributeError.
"""

import ast
import importlib
import os
from typing import Dict, List, Set, Tuple

import pytest
import tensorflow as tf
import tf_slim

from slim_mp import compat

Reference = Tuple[str, str]  # (TensorFlow module, attribute)


def tensorflow_references(source: str) -> Set[Reference]:
    """``(module, attribute)`` for each attribute read on a name bound to a TensorFlow module in ``source``."""
    tree = ast.parse(source)
    bound: Dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tensorflow"):
            bound.update({alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names})
        elif isinstance(node, ast.Import):
            bound.update({alias.asname: alias.name for alias in node.names
                          if alias.name.startswith("tensorflow") and alias.asname})
    return {(bound[node.value.id], node.attr) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound}


def _resolve(dotted: str):
    """The module (or module attribute, e.g. a class) named ``dotted``, or None if it is not a module path."""
    try:
        return importlib.import_module(dotted)
    except ImportError:
        parent, _, name = dotted.rpartition(".")
        return getattr(importlib.import_module(parent), name, None)


def missing_references(sources: Dict[str, str]) -> List[str]:
    """``file: module.attribute`` for each reference of ``sources`` (path -> text) that does not resolve."""
    missing = []
    for path, source in sorted(sources.items()):
        for module_name, attribute in sorted(tensorflow_references(source)):
            module = _resolve(module_name)
            if not isinstance(module, type(tf)):
                continue  # an attribute of a class or function (e.g. dtypes.float32.name): not a moved name
            if not hasattr(module, attribute):
                missing.append(f"{path}: {module_name}.{attribute}")
    return missing


def _tf_slim_sources() -> Dict[str, str]:
    root = os.path.dirname(tf_slim.__file__)
    sources = {}
    for directory, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as handle:
                    sources[os.path.relpath(path, root)] = handle.read()
    return sources


def test_every_tensorflow_name_tf_slim_reads_exists_after_install():
    compat.install()
    assert missing_references(_tf_slim_sources()) == []


def test_the_scan_finds_a_missing_name_and_the_restored_ones():
    source = ("from tensorflow.python.ops import array_ops\nimport tensorflow.python.ops.control_flow_ops as cf\n"
              "array_ops.stack([1])\ncf.case([])\narray_ops.no_such_op_anywhere(1)\n")
    assert tensorflow_references(source) == {
        ("tensorflow.python.ops.array_ops", "stack"), ("tensorflow.python.ops.array_ops", "no_such_op_anywhere"),
        ("tensorflow.python.ops.control_flow_ops", "case")}
    assert missing_references({"user.py": source}) == ["user.py: tensorflow.python.ops.array_ops.no_such_op_anywhere"]


@pytest.mark.parametrize("symbol", compat.MOVED_SYMBOLS, ids=lambda symbol: f"{symbol.old_module}.{symbol.name}")
def test_each_restored_name_is_tensorflows_own_object(symbol):
    """The restored name is the object TensorFlow exports today (not a lookalike), and install() is idempotent."""
    compat.install()
    compat.install()
    restored = getattr(importlib.import_module(symbol.old_module), symbol.name)
    assert restored is getattr(importlib.import_module(symbol.new_module), symbol.new_name)


def test_restored_control_flow_names_are_the_public_tf1_api():
    from tensorflow.python.ops import array_ops, control_flow_ops, variable_scope

    assert (array_ops.stack, array_ops.unstack) == (tf.stack, tf.unstack)
    assert control_flow_ops.cond is tf.compat.v1.cond and control_flow_ops.case is tf.compat.v1.case
    assert control_flow_ops.while_loop is tf.compat.v1.while_loop and control_flow_ops.Assert is tf.compat.v1.Assert
    assert variable_scope.variable is tf.compat.v1.Variable


def test_slim_assign_from_checkpoint_is_the_numpy_2_safe_one():
    from tf_slim.ops import variables as slim_variables

    assert tf_slim.assign_from_checkpoint is compat.assign_from_checkpoint
    assert slim_variables.assign_from_checkpoint is compat.assign_from_checkpoint
