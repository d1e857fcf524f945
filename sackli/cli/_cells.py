"""What records, rows and datapoints look like on a terminal: table cells
and lines (`sackli head`, `cat` and `get` of bags, rows and datasets), their
text escaped by `_escapes`."""

from __future__ import annotations

from typing import Any

from ._escapes import escape_name, escape_text

__all__ = ["CELL_CHARS", "header_cells", "table_cell", "table_line"]

# A table cell shows at most this many characters (longer values end in ...).
CELL_CHARS = 40


def table_cell(value: Any) -> str:
    """A value as one table cell: printable, on one line, at most
    CELL_CHARS characters."""
    if value is None:
        text = "null"
    elif isinstance(value, (bytes, bytearray)):
        text = escape_text(bytes(value))
    else:
        text = escape_text(str(value).encode("utf-8"))
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS - 3] + "..."


def header_cells(names: list[str]) -> list[str]:
    """Column names (field names from a file) as table cells: escaped."""
    return [escape_name(name) for name in names]


def table_line(cells: list[str], widths: list[int]) -> bytes:
    """One line of a table: `cells` (escaped) padded to `widths`."""
    padded = [cell.ljust(width) for cell, width in zip(cells, widths)]
    return ("  ".join(padded).rstrip() + "\n").encode("utf-8")
