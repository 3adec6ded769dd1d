"""Every test file that reads executed graphs, kernels or native-precision decisions carries the ``executed_ops`` mark.

What TensorFlow executes differs with oneDNN on (the default on AVX512-class x86 CPUs) and off
(``TF_ENABLE_ONEDNN_OPTS=0``, and every CPU without AVX-512): ``make test`` runs the marked files a
second time with oneDNN flipped, so a machine of one kind cannot hide a failure on the other. A
test qualifies when its source, or that of a fixture or helper of its file it uses, has one of
``EXECUTED_GRAPH_WORDS``: it carries the mark itself, or its file does with a module-level
``pytestmark``. The check reads the sources with ``ast`` and is also run
on small synthetic files that break it.
"""

import ast
import os
import re
from typing import Dict, List, Set

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
MARK = "executed_ops"
# Run metadata, step stats and partition graphs; kernel names; the step profiler; real op
# micro-benchmarks and the native-precision table (both decide placement from what runs); reading
# TF_ENABLE_ONEDNN_OPTS (setting it, ``TF_ENABLE_ONEDNN_OPTS=...``, pins the kernels: no flip to check).
EXECUTED_GRAPH_WORDS = re.compile(
    r"RunMetadata|step_stats|partition_graphs|FULL_TRACE|profile_session_step|op_family|_Mkl"
    r"|micro_benchmark\(|precision_support\(detect_device|TF_ENABLE_ONEDNN_OPTS(?!=)")


def _is_mark(node: ast.AST) -> bool:
    return any(isinstance(part, ast.Attribute) and part.attr == MARK for part in ast.walk(node))


def _marks_the_module(tree: ast.Module) -> bool:
    return any(isinstance(statement, ast.Assign) and _is_mark(statement.value)
               and any(isinstance(target, ast.Name) and target.id == "pytestmark" for target in statement.targets)
               for statement in tree.body)


def _uses(function: ast.FunctionDef) -> Set[str]:
    """The names a function's body, decorators and arguments mention (helpers it calls, fixtures it requests)."""
    arguments = {argument.arg for argument in function.args.args}
    return arguments | {node.id for node in ast.walk(function) if isinstance(node, ast.Name)}


def _unmarked_readers(source: str) -> List[str]:
    """Tests that use an executed-graph word, directly or through the file's helpers and fixtures, unmarked.

    Top-level code other than functions and imports that uses such a word needs the module mark.
    """
    tree = ast.parse(source)
    if _marks_the_module(tree):
        return []
    functions = {statement.name: statement for statement in tree.body if isinstance(statement, ast.FunctionDef)}
    readers = {name for name, function in functions.items()
               if EXECUTED_GRAPH_WORDS.search(ast.get_source_segment(source, function) or "")}
    while True:
        more = {name for name, function in functions.items() if name not in readers and _uses(function) & readers}
        if not more:
            break
        readers |= more
    unmarked = [name for name in readers if name.startswith("test_")
                and not any(_is_mark(decorator) for decorator in functions[name].decorator_list)]
    unmarked += [f"line {statement.lineno}" for statement in tree.body
                 if not isinstance(statement, (ast.Import, ast.ImportFrom, ast.FunctionDef))
                 and EXECUTED_GRAPH_WORDS.search(ast.get_source_segment(source, statement) or "")]
    return sorted(unmarked)


def unmarked_files(sources: Dict[str, str]) -> Dict[str, List[str]]:
    """Per test file, the tests (or top-level lines) that use executed graphs without the mark."""
    found = {path: _unmarked_readers(source) for path, source in sources.items()
             if os.path.basename(path) != os.path.basename(__file__)}
    return {path: readers for path, readers in sorted(found.items()) if readers}


def _test_sources() -> Dict[str, str]:
    sources = {}
    for directory, subdirectories, files in os.walk(TESTS_DIR):
        subdirectories[:] = [name for name in subdirectories if name not in ("support", "__pycache__")]
        for name in files:
            if name.endswith(".py") and (name.startswith("test_") or name == "conftest.py"):
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as handle:
                    sources[os.path.relpath(path, TESTS_DIR)] = handle.read()
    return sources


def test_every_file_reading_executed_graphs_is_marked():
    sources = _test_sources()
    assert len(sources) > 50, sorted(sources)
    assert unmarked_files(sources) == {}


def test_an_unmarked_reader_of_step_stats_is_reported():
    sources = {
        "measure/test_reads.py": "def test_a(metadata):\n    assert metadata.step_stats\n",
        "measure/test_marked.py": "import pytest\npytestmark = pytest.mark.executed_ops\n"
                                  "def test_a(metadata):\n    assert metadata.step_stats\n",
        "measure/test_other_mark.py": "import pytest\npytestmark = pytest.mark.slow\n"
                                      "def test_a():\n    tf1.RunMetadata()\n",
        "nets/test_plain.py": "from slim_mp.op_families import op_family\ndef test_a():\n    assert 1 + 1 == 2\n",
        "scripts/test_pinned.py": "def test_a():\n    run(TF_ENABLE_ONEDNN_OPTS=\"0\")\n",
        "scripts/test_reads_flag.py": "def test_a():\n    assert os.environ[\"TF_ENABLE_ONEDNN_OPTS\"]\n",
    }
    assert unmarked_files(sources) == {"measure/test_other_mark.py": ["test_a"], "measure/test_reads.py": ["test_a"],
                                       "scripts/test_reads_flag.py": ["test_a"]}


def test_tests_using_a_reading_fixture_or_helper_need_the_mark():
    source = ("import pytest\n@pytest.fixture\ndef profile():\n    return profile_session_step()\n"
              "def _kernel():\n    return tf1.RunOptions(output_partition_graphs=True)\n"
              "def _through_helper():\n    return _kernel()\n"
              "@pytest.mark.executed_ops\ndef test_marked(profile):\n    assert _kernel()\n"
              "def test_fixture(profile):\n    assert profile\n"
              "def test_helper():\n    assert _through_helper()\n"
              "def test_plain():\n    assert True\n"
              "OPTIONS = tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE)\n")
    assert unmarked_files({"test_mixed.py": source}) == {"test_mixed.py": ["line 18", "test_fixture", "test_helper"]}
    listed = source.replace("import pytest\n",
                            "import pytest\npytestmark = [pytest.mark.slow, pytest.mark.executed_ops]\n")
    assert unmarked_files({"test_listed.py": listed}) == {}
