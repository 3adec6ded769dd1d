"""docs/placement.md's tuning table ("### Tuning: `PlacementOptions`") lists exactly the fields of
``PlacementOptions``' records, each by its path (``files.cache_dir``, ``tuning.noise.floor``), and the records
stay small."""

import dataclasses
import os
import re
from typing import List

from slim_mp.graph_pass import NoiseRule, PlacementFiles, PlacementMeasuring, PlacementOptions, PlacementTuning

PLACEMENT_DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "docs", "placement.md")
HEADING = "### Tuning: `PlacementOptions`"
# The records the table opens: their fields are listed, not the record itself.
RECORDS = (PlacementFiles, PlacementMeasuring, PlacementTuning, NoiseRule)
MAX_FIELDS = 12


def table_first_column(markdown: str, heading: str) -> List[str]:
    """The first cells of the table under ``heading`` (its header and rule rows left out)."""
    section = markdown[markdown.index(heading):]
    rows = re.findall(r"^\|([^|]*)\|", section.split("\n#", 1)[0], flags=re.M)
    return [cell.strip() for cell in rows[2:]]


def named_fields(cells: List[str]) -> List[str]:
    """The field names the cells give: every `code span` (a row like `` `warmup` / `runs` `` names two)."""
    return [name for cell in cells for name in re.findall(r"`([^`]+)`", cell)]


def field_paths(record, prefix: str = "") -> List[str]:
    """Every field of ``record`` by its path from ``PlacementOptions``, those of its records' fields within."""
    paths = []
    for field in dataclasses.fields(record):
        value = getattr(record(), field.name)
        if isinstance(value, RECORDS):
            paths.extend(field_paths(type(value), f"{prefix}{field.name}."))
        else:
            paths.append(prefix + field.name)
    return paths


def test_the_tuning_table_lists_every_field_of_the_placement_records_once_by_its_path():
    with open(PLACEMENT_DOC, encoding="utf-8") as handle:
        documented = named_fields(table_first_column(handle.read(), HEADING))
    expected = field_paths(PlacementOptions)
    assert "tuning.noise.settle_step_runs" in expected and "measuring.target" in expected
    assert sorted(documented) == sorted(expected)


def test_placement_options_is_three_records_none_over_twelve_fields():
    assert [field.name for field in dataclasses.fields(PlacementOptions)] == ["files", "measuring", "tuning"]
    assert {record.__name__: len(dataclasses.fields(record)) for record in RECORDS
            if len(dataclasses.fields(record)) > MAX_FIELDS} == {}


def test_a_row_naming_two_fields_counts_both():
    table = f"{HEADING}\n\n| field | default |\n|---|---|\n| `warmup` / `runs` | 1 / 7 |\n| `noise` | x |\n\n## Next\n"
    assert named_fields(table_first_column(table, HEADING)) == ["warmup", "runs", "noise"]
