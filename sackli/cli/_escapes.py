"""Text from files made safe for a terminal: every record, field name,
folder name, path, shard name and error message the command line prints goes
through here, so a name holding `ESC]0;...BEL` or `ESC[2J` shows as escapes
instead of retitling or clearing the user's terminal."""

from __future__ import annotations

__all__ = ["JSON_ESCAPES", "escape_lines", "escape_name", "escape_text"]

# Control characters would move the cursor, change colours or worse on a
# terminal: C0 (but tab), DEL and C1 are printed as escapes.
_TEXT_ESCAPES = str.maketrans(
    {code: f"\\x{code:02x}" for code in [*range(0x20), 0x7F] if code != 0x09}
    | {code: f"\\u{code:04x}" for code in range(0x80, 0xA0)}
    | {0x0A: "\\n", 0x0D: "\\r"}
)
# JSON already escapes C0; DEL and C1 become \u escapes (the same JSON value).
JSON_ESCAPES = str.maketrans({code: f"\\u{code:04x}" for code in [0x7F, *range(0x80, 0xA0)]})


def escape_text(record: bytes) -> str:
    """`record` as text safe to print on a terminal, on one line (invalid
    UTF-8 as \\x escapes)."""
    return record.decode("utf-8", "backslashreplace").translate(_TEXT_ESCAPES)


def escape_name(text: object) -> str:
    """`text` (a name, path or message; str() of anything else) safe to print
    on a terminal, on one line. Undecodable bytes of a file name (which
    Python holds as surrogate escapes) show as \\x escapes. Idempotent:
    escaped text holds no control character."""
    text = str(text)
    if text.isprintable():  # the common case: nothing to escape
        return text
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that no file name holds
        raw = text.encode("utf-8", "backslashreplace")
    return escape_text(raw)


def escape_lines(text: str) -> str:
    """`text` (a message of one or more lines) with every line escaped as
    `escape_name` escapes it; its line breaks are kept."""
    return "\n".join(escape_name(line) for line in text.split("\n"))
