"""Dataset specs: `{"field": "type(args)[]"}` parsed and checked as `bags` 0.5.1 does.

`bags` checks specs with `assert`; we accept exactly the specs it accepts and
raise ValueError / TypeError naming the field otherwise.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, NamedTuple

__all__ = ["FieldType", "ShardFolder", "parse_spec", "spec_json"]

# The pattern `bags` matches a type (after removing a `[]` suffix) against.
_TYPE = re.compile(r"^([a-z0-9-_]+)(\([a-z0-9-_,.]*\))?$")


class FieldType(NamedTuple):
    """One field's parsed type: `utf8[]` -> (True, "utf8", ())."""

    is_list: bool
    dtype: str
    args: tuple[str, ...]


def _parse_type(field: str, text: Any) -> FieldType:
    if not isinstance(text, str):
        raise TypeError(f"field {field!r}: the type must be a str, not {type(text).__name__}")
    is_list = text.endswith("[]")
    base = text[:-2] if is_list else text
    match = _TYPE.match(base)
    if not match:
        raise ValueError(
            f"field {field!r}: bad type {text!r}; expected name, name(arg,...) or either "
            "with a [] suffix, in lower-case letters, digits, '-', '_', ',' and '.'")
    args = tuple(match.group(2)[1:-1].split(",")) if match.group(2) else ()
    return FieldType(is_list, match.group(1), args)


def _check_name(field: Any) -> None:
    if not isinstance(field, str):
        raise TypeError(f"field names must be str, not {type(field).__name__} ({field!r})")
    if field == "refs":
        raise ValueError("'refs' cannot be a field name: refs.bag holds the datapoints' refs")
    # Each field is a file `<field>.bag` in the shard folder.
    if field in ("", ".", "..") or "/" in field or "\0" in field:
        raise ValueError(f"field name {field!r} cannot be a file name")


def parse_spec(spec: Mapping[str, str]) -> dict[str, FieldType]:
    """The spec's fields in sorted name order, each parsed.

    Raises TypeError when `spec` is not a mapping of str to str, ValueError
    for a field named `refs` or a malformed type.
    """
    if not isinstance(spec, Mapping):
        raise TypeError(f"a dataset spec must be a dict, not {type(spec).__name__}")
    for field in spec:
        _check_name(field)
    return {field: _parse_type(field, spec[field]) for field in sorted(spec)}


def spec_json(spec: Mapping[str, Any]) -> bytes:
    """spec.json's content as `bags` writes it: keys sorted, json.dumps'
    default separators."""
    return json.dumps({key: spec[key] for key in sorted(spec)}).encode("utf-8")


class ShardFolder:
    """What a dataset folder's reader and writer both show: its path and
    its parsed spec (subclasses set `_directory` and `_fields`)."""

    _directory: str
    _fields: dict[str, FieldType]

    @property
    def directory(self) -> str:
        """The dataset folder (a local path or a gs:// / s3:// prefix)."""
        return self._directory

    @property
    def spec(self) -> dict[str, FieldType]:
        """The parsed spec: field -> (is_list, dtype, args), in field order."""
        return dict(self._fields)
