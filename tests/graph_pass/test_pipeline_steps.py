"""The pass is told once, as numbered steps in ``slim_mp.graph_pass``'s docstring; the README, docs/placement.md,
``rewrite`` and ``paint`` cite those steps by the same numbers and names (and each step's module exists)."""

import importlib
import os
import re
from typing import List, Tuple

from slim_mp import graph_pass

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def the_steps() -> List[Tuple[str, str]]:
    """(name in lower case, its module) per step of the package docstring, in order, checked numbered 1..n."""
    steps = re.findall(r"^(\d)\. (\w+) \(``(\w+)``", graph_pass.__doc__, re.M)
    assert [int(number) for number, _, _ in steps] == list(range(1, len(steps) + 1))
    return [(name.lower(), module) for _, name, module in steps]


def listed_steps(markdown: str, heading: str) -> List[str]:
    """The bold names of the numbered list under ``heading`` (``1. **select** ...``), checked numbered 1..n."""
    section = markdown[markdown.index(heading):].split("\n## ", 1)[0]
    items = re.findall(r"^(\d)\. \*\*(\w+)\*\*", section, re.M)
    assert [int(number) for number, _ in items] == list(range(1, len(items) + 1))
    return [name for _, name in items]


def test_every_step_names_a_module_of_the_pass():
    steps = the_steps()
    assert len(steps) == 7
    for _, module in steps:
        importlib.import_module(f"slim_mp.graph_pass.{module}")


def test_the_readme_and_the_placement_doc_list_the_same_steps_in_the_same_order():
    names = [name for name, _ in the_steps()]
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    heading = f"## The pipeline in {NUMBERS[len(names)]} steps"
    assert listed_steps(readme, heading) == names
    with open(os.path.join(REPO_ROOT, "docs", "placement.md"), encoding="utf-8") as handle:
        assert listed_steps(handle.read(), "## The pipeline\n") == names


def test_rewrite_and_paint_cite_the_steps_by_their_numbers():
    names = [name for name, _ in the_steps()]
    text = " ".join(importlib.import_module("slim_mp.graph_pass.rewrite").__doc__.split())
    first, last, listed = re.search(r"steps (\d)-(\d) \(([\w, ]+)\)", text).groups()
    assert listed.split(", ") == names[int(first) - 1:int(last)]
    cited = re.findall(r"step (\d) \((\w+)\)", text)
    assert cited == [(str(number), names[number - 1]) for number in range(int(last) + 1, len(names) + 1)]
    paint = importlib.import_module("slim_mp.graph_pass.paint")
    assert names[int(re.search(r"step (\d) of the pass", paint.__doc__).group(1)) - 1] == "paint"
