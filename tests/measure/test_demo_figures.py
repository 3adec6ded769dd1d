"""Every demo figure quoted in two places comes from ``slim_mp.measure.demo``: the documents are compared with it.

The recorded runs (``recorded_runs``) against the README's summary and docs/operations.md's
account of each run; the planner's constants (``budget``) against the sentences that quote them.
"""

import os
import re
from typing import List

import pytest

from slim_mp.measure.demo import budget
from slim_mp.measure.demo.recorded_runs import RECORDED_RUNS, native_figures_sentence

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A wall time (``183 s``) or a speed-up (``1.32×``) as the documents write them.
FIGURE = re.compile(r"\b\d+ s\b|\b\d\.\d\d×")


def read(name: str) -> str:
    with open(os.path.join(REPO_ROOT, name), encoding="utf-8") as handle:
        return handle.read()


def paragraphs(markdown: str) -> List[str]:
    """The prose paragraphs of ``markdown`` (code blocks left out), each on one line."""
    prose = re.sub(r"^```.*?^```$", "", markdown, flags=re.S | re.M)
    return [" ".join(block.split()) for block in prose.split("\n\n") if block.strip()]


def demo_section() -> str:
    text = read("docs/operations.md")
    start = text.index("\n## The demo\n")
    return text[start:text.index("\n## ", start + 1)]


def test_the_front_page_sums_up_every_recorded_run_and_quotes_no_other_figure():
    (summary,) = [text for text in paragraphs(read("README.md")) if "docs/operations.md#the-demo" in text]
    for run in RECORDED_RUNS:
        assert f"{run.machine}: {run.summary()}" in summary
    recorded = FIGURE.findall(" ".join(run.summary() for run in RECORDED_RUNS))
    assert sorted(FIGURE.findall(summary)) == sorted(recorded)


@pytest.mark.parametrize("run", RECORDED_RUNS, ids=lambda run: run.machine)
def test_the_operations_guide_tells_each_recorded_run_with_its_figures(run):
    (account,) = [paragraph for paragraph in paragraphs(demo_section()) if run.machine in paragraph]
    for figure in run.figures():
        assert re.search(rf"(?<![\d.]){re.escape(figure)}", account), (figure, account)


def test_the_output_shown_quotes_the_native_run_as_the_demo_prints_it():
    assert native_figures_sentence() in demo_section()


@pytest.mark.parametrize("document, sentence", [
    ("README.md", f"in about {budget.DEFAULT_BUDGET_SECONDS / 60:g} minutes"),
    ("docs/operations.md", f"default {budget.DEFAULT_BUDGET_SECONDS:.0f} s"),
    ("docs/operations.md", f"fits {budget.LARGE_SPEED_SHARE:.0%} of the budget"),
    ("docs/operations.md", f"at most {budget.MAX_STEPS} and at least {budget.MIN_STEPS}"),
    ("docs/operations.md", f"ends well inside its {budget.DEFAULT_BUDGET_SECONDS:.0f} s"),
    ("docs/operations.md", f"a train step {budget.TRAIN_STEP_FACTOR} times the timed step"),
    ("docs/operations.md", "{0[0][0]} steps give about {0[0][1]}% top-1, {0[1][0]} about {0[1][1]}%".format(
        budget.SHORT_RUN_TOP1)),
])
def test_the_documents_quote_the_planner_s_own_numbers(document, sentence):
    text = demo_section() if document == "docs/operations.md" else read(document)
    assert sentence in " ".join(text.split())
