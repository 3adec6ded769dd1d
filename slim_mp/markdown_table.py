"""Markdown tables of text cells: the one way the reports and scripts of slim_mp write them.

A column is left-aligned (``l``) or right-aligned (``r``, for numbers). A ``|`` inside a cell
(a TensorFlow error message, say) becomes ``/`` so it cannot split the cell.
"""

from typing import Iterable, List, Sequence


def markdown_row(cells: Sequence[str]) -> str:
    """One table line: ``| a | b |``."""
    return "| " + " | ".join(str(cell).replace("|", "/") for cell in cells) + " |"


def markdown_header(header: Sequence[str], align: str = "") -> List[str]:
    """The header line and the rule under it; ``align`` has one ``l``/``r`` per column (missing ones: ``l``).

    Raises:
      ValueError: ``align`` is longer than the header or has a letter other than ``l`` and ``r``.
    """
    if len(align) > len(header) or set(align) - {"l", "r"}:
        raise ValueError(f"align={align!r} must be at most {len(header)} letters l or r, one per column.")
    letters = align.ljust(len(header), "l")
    return [markdown_row(header), "|" + "".join("---:|" if letter == "r" else "---|" for letter in letters)]


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> List[str]:
    """The lines of a whole table: header, rule, one line per row (see ``markdown_header`` for ``align``)."""
    return markdown_header(header, align) + [markdown_row(row) for row in rows]
