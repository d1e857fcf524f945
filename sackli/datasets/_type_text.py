"""A parsed field type written back as spec.json spells it (`utf8[]`,
`int(4)`), for messages and summaries."""

from __future__ import annotations

from ._spec import FieldType

__all__ = ["type_text"]


def type_text(ftype: FieldType) -> str:
    """`FieldType(True, "int", ("4",))` -> `"int(4)[]"`."""
    args = f"({','.join(ftype.args)})" if ftype.args else ""
    return f"{ftype.dtype}{args}{'[]' if ftype.is_list else ''}"
