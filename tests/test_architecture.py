"""The package's layering, read from the source with ``ast`` (nothing is imported or executed).

Ranks (lower layers never import higher ones, nor a different unit of their own rank):

- 0: ``compat``, ``precision``, ``devices``, ``config_fields``, ``json_files``, ``op_families``,
  ``markdown_table``, ``timing``
- 1: ``graph_pass``, ``loss_scale``, ``datasets``, ``train_dir`` (the folder a run writes: its lock, its checkpoints)
- 2: ``numerics``
- 3: ``mixed_precision`` (the facade), ``distribute``, ``seams`` (a user's loop's step function and
  hooks); the package root ``slim_mp/__init__.py`` is the public surface and may import only the
  facade, ``seams`` and ranks 0-2
- 4: ``training``
- 5: ``export``
- 6: ``measure`` (the measuring tools time what training and export make: the serving benchmark exports)

Only modules of rank >= 4 may import the package root (``import slim_mp``, ``from slim_mp import
name``): below that, importing the root would import the facade, i.e. a higher layer. A module or
sub-package missing from the table fails, so new code has to be given a rank here.

Sealed units (``SEALED_UNITS``: the graph pass, the train dir, the training application) are imported from
outside only as the package (``from slim_mp.graph_pass import rewrite``), never by an inner module's path
nor by importing an inner module from the package (``from slim_mp.training import loop``), so moving a
module inside them cannot break a caller.

This docstring's rank list above and the README's "Layout" section name every top-level module and
sub-package of ``slim_mp`` (``listing_gaps``), so neither map goes stale when one is added.

No string of a library layer (ranks 0-3 and the root; docstrings aside) spells a script's flag
(``--name``): those layers mark what the user can change with ``config_fields.argument``, and only
the apps and their command-line runner read it as a flag.

Also: no module is named like a stdlib module, no two modules define a public top-level
function or class of the same name, every package's ``__init__`` docstring names each of its
modules and sub-packages as ````name```` (the map a newcomer reads first cannot go stale), no
import circle exists between modules (``TYPE_CHECKING`` imports count), and no module is longer
than ``MAX_MODULE_LINES``.

Every check is a plain function over ``{module name: source}`` and is also run on small synthetic
packages that break it, so each check is shown to be able to fail.
"""

import ast
import collections
import os
import re
import sys
from typing import Dict, Iterator, List, NamedTuple, Optional, Set, Tuple

import pytest

PACKAGE = "slim_mp"
ROOT = "<root>"  # the unit of slim_mp/__init__.py
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RANKS: Dict[str, int] = {
    "compat": 0, "precision": 0, "devices": 0, "config_fields": 0, "json_files": 0, "op_families": 0,
    "markdown_table": 0, "timing": 0,
    "graph_pass": 1, "loss_scale": 1, "datasets": 1, "train_dir": 1,
    "numerics": 2,
    "mixed_precision": 3, "distribute": 3, "seams": 3,
    "training": 4,
    "export": 5, "measure": 6,
}
ROOT_MAY_IMPORT = frozenset({"mixed_precision", "seams"} | {unit for unit, rank in RANKS.items() if rank <= 2})
MIN_RANK_IMPORTING_ROOT = 4
MAX_MODULE_LINES = 320
# Units whose surface is their package: code outside them imports ``slim_mp.<unit>``, never a module inside.
SEALED_UNITS = frozenset({"graph_pass", "train_dir", "training"})
# The library's layers name what a user can change as arguments (``config_fields.argument``), never as a script's
# flag: only the apps behind the scripts (ranks >= 4) and their command-line runner write ``--name``.
LIBRARY_LAYERS = frozenset({ROOT} | {unit for unit, rank in RANKS.items() if rank < MIN_RANK_IMPORTING_ROOT})
_FLAG_LITERAL = re.compile(r"(?<![\w-])--[a-z][a-z0-9_]*(?![\w-])")
# Top-level packages of this repository that the library must never import.
FORBIDDEN_TOP_LEVEL = frozenset({"scripts", "tests"})

Sources = Dict[str, str]  # dotted module name -> source text; packages are named by their __init__


class Module(NamedTuple):
    name: str
    is_package: bool
    source: str


class Edge(NamedTuple):
    source: str  # importing module
    target: str  # imported module (or the package root)
    line: int


def read_package(repo_root: str = REPO_ROOT, package: str = PACKAGE) -> Dict[str, Module]:
    """Every ``.py`` file under ``repo_root/package``, keyed by dotted module name."""
    modules = {}
    package_dir = os.path.join(repo_root, package)
    for directory, subdirectories, files in os.walk(package_dir):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
        for file_name in sorted(files):
            if not file_name.endswith(".py"):
                continue
            relative = os.path.relpath(os.path.join(directory, file_name), repo_root)[:-len(".py")]
            parts = relative.split(os.sep)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            with open(os.path.join(directory, file_name), encoding="utf-8") as handle:
                modules[name] = Module(name, is_package, handle.read())
    return modules


def _resolve_relative(module: Module, level: int, target: Optional[str]) -> str:
    """The absolute module named by ``from <level dots><target> import ...`` inside ``module``."""
    package_parts = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    if level - 1 > len(package_parts) - 1:
        raise ValueError(f"{module.name}: relative import beyond the top-level package")
    base = package_parts[:len(package_parts) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def import_edges(module: Module, known_modules: Set[str]) -> Iterator[Edge]:
    """Modules ``module`` imports, at any nesting level (``from x import name`` names module ``x.name``
    when that is a module of the package, else ``x``); also ``importlib.import_module("...")`` literals."""
    for node in ast.walk(ast.parse(module.source, filename=module.name)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Edge(module.name, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_relative(module, node.level, node.module) if node.level else node.module
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield Edge(module.name, candidate if candidate in known_modules else base, node.lineno)
        elif isinstance(node, ast.Call) and _is_dynamic_import(node):
            yield Edge(module.name, node.args[0].value, node.lineno)


def _is_dynamic_import(call: ast.Call) -> bool:
    function = call.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
    return (
        name in ("import_module", "__import__") and bool(call.args)
        and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)
    )


def unit_of(module_name: str, package: str = PACKAGE) -> Optional[str]:
    """``ROOT`` for the package itself, its first sub-name for anything below, None outside the package."""
    parts = module_name.split(".")
    if parts[0] != package:
        return None
    return ROOT if len(parts) == 1 else parts[1]


def layering_violations(modules: Dict[str, Module], package: str = PACKAGE) -> List[str]:
    """One readable line per import that breaks the rank table (and per module missing from it)."""
    problems = []
    for name in sorted(modules):
        unit = unit_of(name, package)
        if unit != ROOT and unit not in RANKS:
            problems.append(f"{name}: '{unit}' has no rank; add it to RANKS in tests/test_architecture.py")
    for module in modules.values():
        source_unit = unit_of(module.name, package)
        for edge in import_edges(module, set(modules)):
            problem = _edge_problem(source_unit, edge, package)
            if problem:
                problems.append(f"{edge.source}:{edge.line} imports {edge.target}: {problem}")
    return sorted(set(problems))


def _edge_problem(source_unit: str, edge: Edge, package: str) -> Optional[str]:
    if edge.target.split(".")[0] in FORBIDDEN_TOP_LEVEL:
        return "the library must not import scripts or tests"
    target_unit = unit_of(edge.target, package)
    if target_unit is None or target_unit == source_unit or source_unit not in RANKS and source_unit != ROOT:
        return None
    if target_unit == ROOT:
        rank = RANKS[source_unit]
        if rank < MIN_RANK_IMPORTING_ROOT:
            return (f"only rank >= {MIN_RANK_IMPORTING_ROOT} may import the package root "
                    f"({source_unit} is rank {rank}); import the sub-module instead")
        return None
    if target_unit not in RANKS:
        return f"'{target_unit}' has no rank"
    if source_unit == ROOT:
        return None if target_unit in ROOT_MAY_IMPORT else "the package root may import only the facade and ranks 0-1"
    source_rank, target_rank = RANKS[source_unit], RANKS[target_unit]
    if target_rank > source_rank:
        return f"upward edge (rank {source_rank} {source_unit} -> rank {target_rank} {target_unit})"
    if target_rank == source_rank:
        return f"sideways edge (rank {source_rank}: {source_unit} -> {target_unit})"
    return None


def _bound_names(package: Module) -> Set[str]:
    """The names a package's ``__init__`` binds at its top level (imports, definitions, assignments): a
    ``from package import name`` of one of them gets that object, even where a module has the same name."""
    bound = set()
    for node in ast.parse(package.source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Assign):
            bound |= {target.id for target in node.targets if isinstance(target, ast.Name)}
    return bound


def sealed_unit_violations(modules: Dict[str, Module], package: str = PACKAGE) -> List[str]:
    """One line per import, from outside a sealed unit, that names a module inside it (``import`` and
    ``from`` statements by the module path they name, relative ones resolved, and a module imported by
    name from the package; dynamic imports too)."""
    problems = []
    for module in modules.values():
        source_unit = unit_of(module.name, package)
        for node in ast.walk(ast.parse(module.source, filename=module.name)):
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve_relative(module, node.level, node.module) if node.level else node.module or ""
                bound = _bound_names(modules[base]) if base in modules else set()
                named = [base] + [f"{base}.{alias.name}" for alias in node.names
                                  if f"{base}.{alias.name}" in modules and alias.name not in bound]
            elif isinstance(node, ast.Call) and _is_dynamic_import(node):
                named = [node.args[0].value]
            else:
                continue
            for path in named:
                unit = unit_of(path, package)
                if unit in SEALED_UNITS and unit != source_unit and path != f"{package}.{unit}":
                    problems.append(f"{module.name}:{node.lineno} imports {path}: import {package}.{unit} "
                                    "(its package), not a module inside it")
    return sorted(problems)


def stdlib_named_modules(modules: Dict[str, Module]) -> List[str]:
    """Modules or packages whose own name shadows a stdlib module (``sys.stdlib_module_names``)."""
    return sorted(name for name in modules if name.split(".")[-1] in sys.stdlib_module_names)


def public_definitions(module: Module) -> Iterator[Tuple[str, int]]:
    """``(name, line)`` of the public functions and classes defined at the top level of ``module``."""
    for node in ast.parse(module.source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            yield node.name, node.lineno


def duplicate_public_names(modules: Dict[str, Module]) -> Dict[str, List[str]]:
    """Public top-level function/class names defined in more than one module -> ``module:line`` list."""
    where = collections.defaultdict(list)
    for module in modules.values():
        for name, line in public_definitions(module):
            where[name].append(f"{module.name}:{line}")
    return {name: sorted(places) for name, places in sorted(where.items()) if len(places) > 1}


def unmapped_modules(modules: Dict[str, Module]) -> List[str]:
    """``package: name`` for each direct module or sub-package its ``__init__`` docstring does not name
    as ````name````."""
    missing = []
    for package in sorted(name for name, module in modules.items() if module.is_package):
        docstring = ast.get_docstring(ast.parse(modules[package].source)) or ""
        children = sorted(name for name in modules if name.rpartition(".")[0] == package)
        for child in children:
            short = child.rpartition(".")[2]
            if f"``{short}``" not in docstring:
                missing.append(f"{package}: ``{short}``")
    return missing


def top_level_units(modules: Dict[str, Module], package: str = PACKAGE) -> Set[str]:
    """The top-level modules and sub-packages of ``package`` (``compat``, ``graph_pass``, ...), the root excluded."""
    return {unit_of(name, package) for name in modules} - {ROOT}


def readme_layout_units(readme: str, package: str = PACKAGE) -> Set[str]:
    """What the README's "Layout" block lists directly under ``package/``: ``name.py`` and ``name/`` entries that
    start a line indented by two spaces or follow a `` · `` on it (``__init__.py`` is the root)."""
    block = readme.split("## Layout", 1)[1].split("```")[1]
    lines = block.splitlines()
    start = next(index for index, line in enumerate(lines) if line.strip() == f"{package}/")
    listed = set()
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        if line.startswith("   "):
            continue
        for entry in line.split("·"):
            match = re.match(r"\s*(\w+)(?:\.py|/)(?:\s|$)", entry)
            if match and match.group(1) != "__init__":
                listed.add(match.group(1))
    return listed


def docstring_rank_units(docstring: str) -> Set[str]:
    """The units the "Ranks" list of this module's docstring names (````name```` in its ``- N:`` items)."""
    ranks = docstring.split("Ranks", 1)[1].split("\n\n", 2)[1]
    return {name for name in re.findall(r"``(\w+)``", ranks)}


def listing_gaps(units: Set[str], listed: Set[str], where: str) -> List[str]:
    """One line per unit ``where`` leaves out, and per name it lists that is no unit."""
    return ([f"{where} does not list {unit}" for unit in sorted(units - listed)]
            + [f"{where} lists {name}, which is no top-level module or sub-package" for name in sorted(listed - units)])


def _docstring_nodes(tree: ast.AST) -> Set[int]:
    """The ids of the string constants that are docstrings (of the module, a class or a function)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def flag_literals(modules: Dict[str, Module], package: str = PACKAGE) -> List[str]:
    """``module:line --flag`` for each string literal (f-string parts included, docstrings aside) of a library
    layer (``LIBRARY_LAYERS``) that spells a script's flag; ``--no-deps`` and the like (a hyphen) are other tools'."""
    found = []
    for module in modules.values():
        if unit_of(module.name, package) not in LIBRARY_LAYERS:
            continue
        tree = ast.parse(module.source, filename=module.name)
        docstrings = _docstring_nodes(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found += [f"{module.name}:{node.lineno} {flag}" for flag in _FLAG_LITERAL.findall(node.value)]
    return sorted(found)


def import_circles(modules: Dict[str, Module]) -> List[List[str]]:
    """Each strongly connected group of more than one module in the import graph (``TYPE_CHECKING`` and
    function-level imports included; a package importing its own modules does not count)."""
    known = set(modules)
    graph = {name: set() for name in modules}
    for module in modules.values():
        for edge in import_edges(module, known):
            target = edge.target
            while target not in known and "." in target:
                target = target.rpartition(".")[0]
            if target in known and target != module.name and not (
                    module.is_package and target.startswith(module.name + ".")):
                graph[module.name].add(target)
    return [sorted(group) for group in _strongly_connected(graph) if len(group) > 1]


def _strongly_connected(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Tarjan's groups, iteratively (the package is small, but recursion depth is not ours to spend)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    groups = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            successor = next(successors, None)
            if successor is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    groups.append(group)
            elif successor not in index:
                index[successor] = low[successor] = len(index)
                stack.append(successor)
                on_stack.add(successor)
                work.append((successor, iter(sorted(graph[successor]))))
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
    return groups


def long_modules(modules: Dict[str, Module], limit: int = MAX_MODULE_LINES) -> List[str]:
    """``name (lines)`` for each module longer than ``limit`` lines."""
    return [f"{name} ({len(module.source.splitlines())} lines)" for name, module in sorted(modules.items())
            if len(module.source.splitlines()) > limit]


# --- the real package -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def package_modules() -> Dict[str, Module]:
    modules = read_package()
    assert f"{PACKAGE}.training.loop" in modules, "the walk did not find the package source"
    return modules


def test_every_import_follows_the_rank_table(package_modules):
    problems = layering_violations(package_modules)
    assert not problems, "\n".join(problems)


def test_nothing_outside_a_sealed_unit_imports_its_inner_modules(package_modules):
    problems = sealed_unit_violations(package_modules)
    assert not problems, "\n".join(problems)


def test_no_module_is_named_like_a_stdlib_module(package_modules):
    shadowing = stdlib_named_modules(package_modules)
    assert not shadowing, f"rename these modules, they shadow the stdlib: {shadowing}"


def test_public_functions_and_classes_have_one_home(package_modules):
    duplicates = duplicate_public_names(package_modules)
    assert not duplicates, "\n".join(f"{name}: {', '.join(places)}" for name, places in duplicates.items())


def test_every_package_docstring_names_its_modules(package_modules):
    missing = unmapped_modules(package_modules)
    assert not missing, "name these in the package's __init__ docstring:\n" + "\n".join(missing)


def test_the_readme_layout_and_the_rank_list_name_every_top_level_unit(package_modules):
    units = top_level_units(package_modules)
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    gaps = (listing_gaps(units, readme_layout_units(readme), "README.md's Layout")
            + listing_gaps(units, docstring_rank_units(__doc__), "tests/test_architecture.py's rank list")
            + listing_gaps(units, set(RANKS), "RANKS"))
    assert not gaps, "\n".join(gaps)


def test_the_library_layers_name_arguments_never_flags(package_modules):
    literals = flag_literals(package_modules)
    assert not literals, "name these with config_fields.argument (the scripts' runner reads them as flags):\n" + \
        "\n".join(literals)


def test_no_import_circle(package_modules):
    circles = import_circles(package_modules)
    assert not circles, "\n".join(" <-> ".join(circle) for circle in circles)


def test_no_module_is_longer_than_the_limit(package_modules):
    too_long = long_modules(package_modules)
    assert not too_long, f"split these (at most {MAX_MODULE_LINES} lines): {too_long}"


# --- each check can fail ------------------------------------------------------------------------------------


def synthetic(files: Dict[str, str]) -> Dict[str, Module]:
    """A fake ``slim_mp`` from ``{relative path without .py: source}`` (``"graph_pass/__init__"`` etc.)."""
    modules = {}
    for path, source in files.items():
        parts = [PACKAGE] + path.split("/")
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        modules[name] = Module(name, is_package, source)
    return modules


BASE_FILES = {
    "__init__": "from slim_mp.mixed_precision import enable_mixed_precision\nfrom slim_mp import compat\n",
    "compat": "import importlib\n",
    "precision": "",
    "mixed_precision": "from slim_mp.graph_pass import rewrite\nfrom slim_mp.loss_scale import optimizer\n",
    "graph_pass/__init__": "from slim_mp.graph_pass.rewrite import rewrite\n",
    "graph_pass/rewrite": "from . import paint\nfrom ..precision import resolve\n",
    "graph_pass/paint": "",
    "loss_scale/__init__": "",
    "loss_scale/optimizer": "",
    "distribute/__init__": "",
    "distribute/clones": "from slim_mp.loss_scale.optimizer import X\n",
    "training/__init__": "",
    "training/loop": (
        "import slim_mp\nfrom slim_mp.distribute import clones\nfrom slim_mp import enable_mixed_precision\n"
    ),
    "measure/__init__": "",
    "measure/parity": "from slim_mp.training import train\n",
}


def test_a_package_that_follows_the_rules_passes():
    assert layering_violations(synthetic(BASE_FILES)) == []


@pytest.mark.parametrize("path, source, expected", [
    ("graph_pass/paint", "def f():\n    if True:\n        from slim_mp.loss_scale import optimizer\n",
     "graph_pass.paint:3 imports slim_mp.loss_scale.optimizer: sideways edge"),
    ("graph_pass/paint", "from ..loss_scale import optimizer\n", "sideways edge"),
    ("graph_pass/paint", "from .. import mixed_precision\n", "imports slim_mp.mixed_precision: upward edge"),
    ("graph_pass/paint", "import slim_mp.training.loop\n", "upward edge"),
    ("precision", "from slim_mp import compat\n", "sideways edge (rank 0: precision -> compat)"),
    ("compat", "importlib.import_module('slim_mp.graph_pass.rewrite')\n", "upward edge"),
    ("distribute/clones", "from slim_mp.mixed_precision import enable_mixed_precision\n", "sideways edge"),
    ("distribute/clones", "import slim_mp\n", "only rank >= 4 may import the package root"),
    ("distribute/clones", "from slim_mp import enable_mixed_precision\n", "only rank >= 4 may import"),
    ("distribute/clones", "from .. import enable_mixed_precision\n", "only rank >= 4 may import"),
    ("loss_scale/optimizer", "from slim_mp.datasets import x\n", "sideways edge"),
    ("__init__", "from slim_mp.distribute import clones\n", "the package root may import only"),
    ("__init__", "from slim_mp.training import loop\n", "the package root may import only"),
    ("export/saved_model", "from slim_mp.measure import parity\n", "upward edge (rank 5 export -> rank 6 measure)"),
    ("training/loop", "import scripts.train_image_classifier\n", "must not import scripts or tests"),
    ("unknown_pkg/__init__", "", "'unknown_pkg' has no rank"),
    ("helpers", "", "'helpers' has no rank"),
])
def test_a_bad_import_is_reported(path, source, expected):
    files = dict(BASE_FILES)
    files[path] = files.get(path, "") + source
    problems = layering_violations(synthetic(files))
    assert any(expected in problem for problem in problems), problems


@pytest.mark.parametrize("path, source", [
    ("measure/parity", "from slim_mp.graph_pass.placement.timing_cache import cache_dir\n"),
    ("measure/parity", "import slim_mp.graph_pass.paint\n"),
    ("measure/parity", "from ..graph_pass.placement import PlacementOptions\n"),
    ("training/loop", "importlib.import_module('slim_mp.graph_pass.rewrite')\n"),
    ("measure/parity", "from slim_mp.training.loop import train\n"),
    ("measure/parity", "from slim_mp.training import loop\n"),
    ("export/__init__", "from ..training import loop\n"),
])
def test_an_import_of_a_sealed_units_inner_module_is_reported(path, source):
    files = dict(BASE_FILES)
    assert sealed_unit_violations(synthetic(files)) == [], "the package itself may be imported"
    files[path] = files.get(path, "") + source
    (problem,) = sealed_unit_violations(synthetic(files))
    unit = "training" if "training" in source else "graph_pass"
    assert f"import slim_mp.{unit} (its package), not a module inside it" in problem


def test_relative_imports_resolve_against_the_package():
    modules = synthetic(BASE_FILES)
    edges = {edge.target for edge in import_edges(modules["slim_mp.graph_pass.rewrite"], set(modules))}
    assert edges == {"slim_mp.graph_pass.paint", "slim_mp.precision"}
    package_edges = import_edges(Module("slim_mp.graph_pass", True, "from .paint import f\n"), set(modules))
    assert [edge.target for edge in package_edges] == ["slim_mp.graph_pass.paint"]


def test_a_module_named_like_the_stdlib_is_reported():
    modules = synthetic({**BASE_FILES, "training/logging": "", "queue/__init__": ""})
    assert stdlib_named_modules(modules) == ["slim_mp.queue", "slim_mp.training.logging"]


def test_a_public_name_defined_twice_is_reported():
    modules = synthetic({
        "graph_pass/paint": "class Report:\n    pass\ndef _private():\n    pass\nhelper = 1\n",
        "loss_scale/optimizer": "def _private():\n    pass\n\n\ndef Report():\n    pass\ndef helper():\n    pass\n",
    })
    assert duplicate_public_names(modules) == {
        "Report": ["slim_mp.graph_pass.paint:1", "slim_mp.loss_scale.optimizer:5"],
    }


def test_a_module_missing_from_its_package_docstring_is_reported():
    modules = synthetic({
        "__init__": '"""The root: ``graph_pass`` and ``loss_scale``."""\n',
        "graph_pass/__init__": '"""Paints (``paint``); the word rewrite without backticks does not count."""\n',
        "graph_pass/paint": "", "graph_pass/rewrite": "", "loss_scale/__init__": "",
    })
    assert unmapped_modules(modules) == ["slim_mp.graph_pass: ``rewrite``"]


def test_an_import_circle_is_reported_even_behind_type_checking():
    modules = synthetic({
        "measure/__init__": "from slim_mp.measure import load\n",
        "measure/load": "from slim_mp.measure import suite\n",
        "measure/suite": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                          "    from slim_mp.measure.load import L\n"),
        "measure/report": "from slim_mp.measure.suite import S\n",
    })
    assert import_circles(modules) == [["slim_mp.measure.load", "slim_mp.measure.suite"]]
    del modules["slim_mp.measure.suite"]
    assert import_circles(modules) == []


def test_a_long_module_is_reported():
    modules = synthetic({"compat": "x = 1\n" * 4, "precision": "x = 1\n" * 3})
    assert long_modules(modules, limit=3) == ["slim_mp.compat (4 lines)"]


README_LAYOUT = """
## Layout

```
slim_mp/
  __init__.py        public API
  compat.py          fixes ·  precision.py  precision names
  graph_pass/        the rewrite: report/ and paint
    placement/       the measured placement
  loss_scale/        managers
nets/                the zoo
```
"""


def test_a_unit_missing_from_the_readme_layout_or_the_rank_list_is_reported():
    units = {"compat", "precision", "graph_pass", "loss_scale", "datasets"}
    assert readme_layout_units(README_LAYOUT) == {"compat", "precision", "graph_pass", "loss_scale"}
    assert listing_gaps(units, readme_layout_units(README_LAYOUT), "README") == ["README does not list datasets"]
    ranks = "Ranks (intro):\n\n- 0: ``compat``, ``precision``\n- 1: ``graph_pass``, ``helpers``\n\nOnly ``loss_scale``"
    assert docstring_rank_units(ranks) == {"compat", "precision", "graph_pass", "helpers"}
    assert listing_gaps(units, docstring_rank_units(ranks), "ranks") == [
        "ranks does not list datasets", "ranks does not list loss_scale",
        "ranks lists helpers, which is no top-level module or sub-package"]


def test_a_flag_spelt_in_a_library_layer_is_reported():
    modules = synthetic({
        "datasets/factory": ('"""Docstrings may say --dataset_dir."""\n'
                             'def f(d):\n    """Nor here: --x."""\n    raise ValueError(f"--dataset_dir={d} is bad")\n'
                             'PIP = "pip install --no-deps tf-keras"\n'),
        "training/cli": 'FLAG = "--train_dir"\n',
    })
    assert flag_literals(modules) == ["slim_mp.datasets.factory:4 --dataset_dir"]
