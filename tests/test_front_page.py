"""The README stays a front page, and the documentation's links lead somewhere.

Three rules: ``README.md`` has at most ``MAX_README_LINES`` lines; its contents list names each of
its ``##`` headings, in order, with the anchor GitHub gives that heading; and every relative link of
``README.md``, ``CONTRIBUTING.md`` and ``docs/*.md`` points at a file that exists (and, for a
markdown file with ``#fragment``, at one of its headings). Links inside code are not links. Each
rule is also run on small synthetic texts that break it.
"""

import glob
import os
import re
from typing import Dict, List, Optional, Tuple

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_README_LINES = 260
CONTENTS_HEADING = "Contents"

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_CONTENTS_ENTRY = re.compile(r"^\s*[-*] \[([^\]]+)\]\((#[^)]*)\)\s*$")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def without_code(text: str) -> str:
    """``text`` with fenced blocks and inline code spans blanked (their lines kept, so counts still hold)."""
    text = _FENCE.sub(lambda match: "\n" * match.group(0).count("\n"), text)
    return _CODE_SPAN.sub("", text)


def headings(text: str, level: int) -> List[str]:
    """The titles of the headings of exactly ``level`` (``##`` is 2), outside code, in order."""
    marker = "#" * level + " "
    return [line[len(marker):].strip() for line in _FENCE.sub("", text).splitlines() if line.startswith(marker)]


def heading_anchors(text: str) -> List[str]:
    """The anchors GitHub gives every heading of ``text``, counting repeats as ``-1``, ``-2``, ..."""
    anchors: List[str] = []
    seen: Dict[str, int] = {}
    for line in _FENCE.sub("", text).splitlines():
        match = re.match(r"^#{1,6} (.+)$", line)
        if match:
            anchor = github_anchor(match.group(1))
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            anchors.append(anchor if count == 0 else f"{anchor}-{count}")
    return anchors


def github_anchor(title: str) -> str:
    """The anchor of a heading: lower case, punctuation dropped except ``-`` and ``_``, spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def contents_problems(text: str) -> List[str]:
    """How the ``## Contents`` list of ``text`` fails to mirror its other ``##`` headings (empty: it does)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == f"## {CONTENTS_HEADING}"), None)
    if start is None:
        return [f"no '## {CONTENTS_HEADING}' heading"]
    entries: List[Tuple[str, str]] = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        match = _CONTENTS_ENTRY.match(line)
        if match:
            entries.append((match.group(1), match.group(2)))
    sections = [title for title in headings(text, 2) if title != CONTENTS_HEADING]
    problems = []
    if [title for title, _ in entries] != sections:
        problems.append(f"the contents list names {[title for title, _ in entries]}, the ## headings are {sections}")
    for title, anchor in entries:
        if anchor != "#" + github_anchor(title):
            problems.append(f"contents entry {title!r} links {anchor}, its heading's anchor is #{github_anchor(title)}")
    return problems


def length_problem(text: str, limit: int = MAX_README_LINES) -> Optional[str]:
    """Why ``text`` is too long for a front page, or None when it has at most ``limit`` lines."""
    lines = len(text.splitlines())
    if lines <= limit:
        return None
    return f"{lines} lines, more than {limit}: move detail to docs/ and link it"


def broken_links(path: str) -> List[str]:
    """``file: target`` for each relative link of the markdown file ``path`` that leads nowhere."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    problems = []
    for target in _LINK.findall(without_code(text)):
        if _EXTERNAL.match(target):
            continue
        file_part, _, fragment = target.partition("#")
        linked = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(linked):
            problems.append(f"{path}: {target} (no such file)")
        elif fragment and linked.endswith(".md"):
            with open(linked, encoding="utf-8") as handle:
                if fragment not in heading_anchors(handle.read()):
                    problems.append(f"{path}: {target} (no heading with that anchor)")
    return problems


def documentation_files(repo_root: str = REPO_ROOT) -> List[str]:
    """README.md, CONTRIBUTING.md and every ``docs/*.md`` of ``repo_root``."""
    return [os.path.join(repo_root, "README.md"), os.path.join(repo_root, "CONTRIBUTING.md"),
            *sorted(glob.glob(os.path.join(repo_root, "docs", "*.md")))]


def read_readme() -> str:
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as handle:
        return handle.read()


# --- the real documentation -------------------------------------------------------------------------------


def test_the_readme_is_a_front_page():
    problem = length_problem(read_readme())
    assert problem is None, f"README.md: {problem}"


def test_the_readme_contents_list_matches_its_headings():
    problems = contents_problems(read_readme())
    assert not problems, "\n".join(problems)


def test_every_relative_link_of_the_documentation_leads_to_a_file():
    files = documentation_files()
    assert all(os.path.exists(path) for path in files), files
    problems = [problem for path in files for problem in broken_links(path)]
    assert not problems, "\n".join(problems)


# --- the rules on synthetic texts ---------------------------------------------------------------------------

GOOD_PAGE = """# Title

## Contents

- [Install](#install)
- [Use it: the `rewrite` call](#use-it-the-rewrite-call)

## Install

See [the guide](guide.md#setup) and [the web](https://example.com/missing.md).

```
## not a heading, and [not a link](nowhere.md)
```

## Use it: the `rewrite` call

`[a code span](nowhere.md)` is not a link either.
"""


def test_a_contents_list_that_mirrors_the_headings_passes():
    assert contents_problems(GOOD_PAGE) == []


@pytest.mark.parametrize("edit, expected", [
    (lambda page: page.replace("- [Install](#install)\n", ""), "the contents list names"),
    (lambda page: page.replace("(#install)", "(#instal)"), "links #instal"),
    (lambda page: page + "\n## Layout\n", "'Layout'"),
    (lambda page: page.replace("## Contents", "## Sections"), "no '## Contents' heading"),
])
def test_a_contents_list_out_of_step_with_the_headings_fails(edit, expected):
    problems = contents_problems(edit(GOOD_PAGE))
    assert problems and expected in "\n".join(problems)


def test_a_link_to_a_missing_file_or_heading_is_found_and_code_is_not_read(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(GOOD_PAGE)
    assert broken_links(str(page)) == [f"{page}: guide.md#setup (no such file)"]
    (tmp_path / "guide.md").write_text("# Guide\n\n## Other\n")
    assert broken_links(str(page)) == [f"{page}: guide.md#setup (no heading with that anchor)"]
    (tmp_path / "guide.md").write_text("# Guide\n\n## Setup\n")
    assert broken_links(str(page)) == []


def test_a_link_into_a_folder_above_is_resolved_from_the_linking_file(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Front\n")
    inner = tmp_path / "docs" / "inner.md"
    inner.write_text("Back to [the front](../README.md), not [here](README.md).\n")
    assert broken_links(str(inner)) == [f"{inner}: README.md (no such file)"]


def test_a_page_over_the_limit_is_too_long():
    assert length_problem("line\n" * MAX_README_LINES) is None
    assert length_problem("line\n" * (MAX_README_LINES + 1)).startswith(f"{MAX_README_LINES + 1} lines")
