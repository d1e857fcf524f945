"""How `encoding="json"` carries Arrow types that JSON has no name for.

Each top-level column is converted before its rows become JSON objects,
and converted back after pyarrow parses them:

  timestamps                   ISO 8601 text (with the UTC offset when zoned)
  dates, decimals              the text Arrow casts them to and from
  times, durations             integer counts of their unit
  binary                       base64 text
  maps                         lists of {"key": k, "value": v} objects
  dictionaries                 their values (as in the "arrow" encoding)
  NaN, +-infinity (floats,     the strings "NaN", "Infinity", "-Infinity", at
    at any depth)                any depth: JSON has no such numbers, and a
                                 bare NaN is invalid JSON that tools like jq
                                 silently turn into null
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from ._types import decode_dictionaries, storage_type

__all__ = ["dump_row", "from_json_table", "json_parse_schema", "non_finite_as_text",
           "parse_non_finite", "to_json_batch"]

_BINARY = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_fixed_size_binary,
           pa.types.is_binary_view)


def _json_type(t: pa.DataType) -> pa.DataType:
    """The type a top-level column of type `t` has in JSON (as parsed)."""
    t = storage_type(t)
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_decimal(t):
        return pa.string()
    if any(check(t) for check in _BINARY):
        return pa.string()
    if pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_time64(t) or pa.types.is_duration(t):
        return pa.int64()
    if pa.types.is_map(t):
        return pa.list_(pa.struct([pa.field("key", t.key_type, nullable=False),
                                   pa.field("value", t.item_type)]))
    return t


def _to_json(array: pa.Array) -> pa.Array:
    array = decode_dictionaries(array)
    t = array.type
    if any(check(t) for check in _BINARY):
        return pa.array([None if v is None else base64.b64encode(v).decode("ascii")
                         for v in array.to_pylist()], pa.string())
    if pa.types.is_map(t):
        return pa.ListArray.from_arrays(
            array.offsets, pa.StructArray.from_arrays([array.keys, array.items], ["key", "value"]),
            mask=array.is_null())
    if pa.types.is_timestamp(t):
        # Arrow's %S prints the fraction the unit holds; zoned times print
        # as local time with their offset.
        return pc.strftime(array, format="%Y-%m-%dT%H:%M:%S" + ("%z" if t.tz else ""))
    target = _json_type(t)
    return array.cast(target) if target != t else array


def to_json_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` with every column in its JSON form (see the module doc)."""
    return pa.RecordBatch.from_arrays([_to_json(c) for c in batch.columns],
                                      names=batch.schema.names)


def json_parse_schema(schema: pa.Schema) -> pa.Schema:
    """The schema pyarrow parses rows written for `schema` with."""
    return pa.schema([f.with_type(_json_type(f.type)) for f in schema])


def _from_json(array: pa.Array, field: pa.Field,
               restore: Callable[[pa.Array, pa.DataType], pa.Array]) -> pa.Array:
    t = storage_type(field.type)
    if any(check(t) for check in _BINARY):
        array = pa.array([None if v is None else base64.b64decode(v) for v in array.to_pylist()],
                         t)
    elif pa.types.is_map(t):
        values = array.values
        array = pa.MapArray.from_arrays(array.offsets, values.field("key"), values.field("value"),
                                        type=t, mask=array.is_null())
    elif array.type != t:
        array = array.cast(t)
    return restore(array, field.type)


def from_json_table(table: pa.Table, schema: pa.Schema,
                    restore: Callable[[pa.Array, pa.DataType], pa.Array]) -> pa.Table:
    """A table parsed with json_parse_schema(schema), as `schema`; `restore`
    turns decoded dictionary values back into dictionaries."""
    table = table.combine_chunks()
    columns = [_from_json(table.column(i).chunk(0) if table.column(i).num_chunks else
                          pa.array([], _json_type(f.type)), f, restore)
               for i, f in enumerate(schema)]
    return pa.Table.from_arrays(columns, schema=schema)


def non_finite_as_text(value: Any) -> Any:
    """`value` (a row as Python objects) with every NaN and infinity, at any
    depth, as the text that stands for it."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: non_finite_as_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [non_finite_as_text(item) for item in value]
    return value


def parse_non_finite(value: Any, t: pa.DataType) -> Any:
    """A parsed JSON value of Arrow type `t` (as json_parse_schema gives
    it) with the texts of NaN and infinities in float places back as
    floats. ValueError for other text in a float place."""
    if value is None:
        return None
    if pa.types.is_floating(t):
        if isinstance(value, str):
            if value not in ("NaN", "Infinity", "-Infinity"):
                raise ValueError(f"{value!r} where a number belongs")
            return float(value)
        return value
    if (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t)):
        return [parse_non_finite(item, t.value_type) for item in value]
    if pa.types.is_struct(t) and isinstance(value, dict):
        fields = {t.field(i).name: t.field(i).type for i in range(t.num_fields)}
        return {key: parse_non_finite(item, fields[key]) if key in fields else item
                for key, item in value.items()}
    return value


def _python_json(value: Any) -> Any:
    """JSON for the Python values (`to_pylist`) of Arrow types JSON has no
    name for, where a column was not converted first (nested values)."""
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


_STRICT_DUMPS = json.JSONEncoder(default=_python_json, ensure_ascii=False, separators=(",", ":"),
                                 allow_nan=False).encode


def dump_row(row: dict) -> str:
    """A row (Python values) as compact, valid JSON: NaN and infinities
    as their texts."""
    try:
        return _STRICT_DUMPS(row)
    except ValueError:  # a NaN or infinity: valid JSON only as text
        return _STRICT_DUMPS(non_finite_as_text(row))
