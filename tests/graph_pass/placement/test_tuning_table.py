"""docs/placement.md's tuning table ("### Tuning: `PlacementOptions`") lists exactly ``PlacementOptions``' fields."""

import dataclasses
import os
import re
from typing import List

from slim_mp.graph_pass import PlacementOptions

PLACEMENT_DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "docs", "placement.md")
HEADING = "### Tuning: `PlacementOptions`"


def table_first_column(markdown: str, heading: str) -> List[str]:
    """The first cells of the table under ``heading`` (its header and rule rows left out)."""
    section = markdown[markdown.index(heading):]
    rows = re.findall(r"^\|([^|]*)\|", section.split("\n#", 1)[0], flags=re.M)
    return [cell.strip() for cell in rows[2:]]


def named_fields(cells: List[str]) -> List[str]:
    """The field names the cells give: every `code span` (a row like `` `warmup` / `runs` `` names two)."""
    return [name for cell in cells for name in re.findall(r"`([^`]+)`", cell)]


def test_the_tuning_table_lists_every_field_of_placement_options_once():
    with open(PLACEMENT_DOC, encoding="utf-8") as handle:
        documented = named_fields(table_first_column(handle.read(), HEADING))
    assert sorted(documented) == sorted(field.name for field in dataclasses.fields(PlacementOptions))


def test_a_row_naming_two_fields_counts_both():
    table = f"{HEADING}\n\n| field | default |\n|---|---|\n| `warmup` / `runs` | 1 / 7 |\n| `noise` | x |\n\n## Next\n"
    assert named_fields(table_first_column(table, HEADING)) == ["warmup", "runs", "noise"]
