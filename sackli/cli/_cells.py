"""What records, rows and datapoints look like on a terminal: text with
control characters escaped, JSON with DEL and C1 escaped, and table cells
and lines (`sackli head`, `cat` and `get` of bags, rows and datasets)."""

from __future__ import annotations

from typing import Any

__all__ = ["CELL_CHARS", "JSON_ESCAPES", "escape_lines", "escape_name", "escape_text", "table_cell",
           "table_line"]

# Control characters would move the cursor, change colours or worse on a
# terminal: C0 (but tab), DEL and C1 are printed as escapes.
_TEXT_ESCAPES = str.maketrans(
    {code: f"\\x{code:02x}" for code in [*range(0x20), 0x7F] if code != 0x09}
    | {code: f"\\u{code:04x}" for code in range(0x80, 0xA0)}
    | {0x0A: "\\n", 0x0D: "\\r"}
)
# JSON already escapes C0; DEL and C1 become \u escapes (the same JSON value).
JSON_ESCAPES = str.maketrans({code: f"\\u{code:04x}" for code in [0x7F, *range(0x80, 0xA0)]})

# A table cell shows at most this many characters (longer values end in ...).
CELL_CHARS = 40


def escape_text(record: bytes) -> str:
    """`record` as text safe to print on a terminal, on one line."""
    return record.decode("utf-8", "backslashreplace").translate(_TEXT_ESCAPES)


def escape_name(text: str) -> str:
    """A name, path or message safe to print on a terminal, on one line:
    control characters escaped, and the bytes of a name that is not UTF-8
    (Python's surrogate escapes) as \\x escapes."""
    return escape_text(text.encode("utf-8", "surrogateescape"))


def escape_lines(text: str) -> str:
    """`text` (a message of one or more lines) with every line escaped as
    `escape_name` escapes it; its line breaks are kept."""
    return "\n".join(escape_name(line) for line in text.split("\n"))


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


def table_line(cells: list[str], widths: list[int]) -> bytes:
    """One line of a table: `cells` padded to `widths`."""
    padded = [cell.ljust(width) for cell, width in zip(cells, widths)]
    return ("  ".join(padded).rstrip() + "\n").encode("utf-8")
