"""Records to Arrow: each decoder turns a batch of records, laid out
together, into a RecordBatch of one fixed schema.

Records that are not the rows they should be (not IPC rows of the schema,
not JSON objects, not convertible to the written schema) are corruption:
`sackli.CorruptionError` (a ValueError), naming the bag and the record, as
the engine and the text formats do. A user's decode function that misbehaves
is a ValueError/TypeError about that function."""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

import pyarrow as pa
import pyarrow.json as pa_json

from .. import CorruptionError
from ._json_types import from_json_table, json_parse_schema, parse_non_finite
from ._row_codec import ROW_ENCODING, NativeRowDecoder
from ._types import from_storage, restore_dictionaries, storage_schema

__all__ = ["RECORD_COLUMN", "holds_raw_records", "make_decoder", "records_array"]

RECORD_COLUMN = "record"

_RAW_TYPES = (pa.binary(), pa.large_binary(), pa.binary_view())


def holds_raw_records(schema: pa.Schema) -> bool:
    """Whether a table of `schema` is raw records, as `RawDecoder` (decode
    "raw") gives them: one binary column named `record`."""
    return len(schema) == 1 and schema[0].name == RECORD_COLUMN and schema[0].type in _RAW_TYPES


def records_array(data: Any, offsets: Any) -> pa.LargeBinaryArray:
    """A large_binary array over records laid out together, without a copy:
    `data` and `offsets` (int64) are any buffers."""
    offsets_buffer = pa.py_buffer(offsets)
    count = offsets_buffer.size // 8 - 1
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), count, [None, offsets_buffer, pa.py_buffer(data)])


class RawDecoder:
    """Records as they are, in one large_binary column `record`."""

    prefix = b""

    def __init__(self) -> None:
        self.schema = pa.schema([pa.field(RECORD_COLUMN, pa.large_binary(), nullable=False)])

    def decode(self, data: Any, offsets: Any, source: str, first: int) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays([records_array(data, offsets)], schema=self.schema)


class ArrowRowDecoder:
    """Rows written with encoding="arrow": each record is a one-row IPC
    record batch message. The schema's message goes in front of a batch of
    them, so that pyarrow reads the whole batch as one IPC stream. pyarrow
    does that without the GIL, so parts of a batch decode in parallel."""

    parallel = True

    def __init__(self, schema: pa.Schema, columns: Sequence[str] | None) -> None:
        storage = storage_schema(schema)
        self.prefix = storage.serialize().to_pybytes()
        self._options = None
        self._columns = None
        if columns is not None:
            missing = [c for c in columns if c not in schema.names]
            if missing:
                raise KeyError(f"no column {missing[0]!r} (columns: {', '.join(schema.names)})")
            self._columns = list(columns)
            indices = sorted({schema.get_field_index(c) for c in columns})
            self._options = pa.ipc.IpcReadOptions(included_fields=indices)
            schema = pa.schema([schema.field(c) for c in columns], metadata=schema.metadata)
            storage = pa.schema([storage.field(c) for c in columns], metadata=storage.metadata)
        self.schema = schema
        self._storage = storage

    def decode(self, data: Any, offsets: Any, source: str, first: int) -> pa.RecordBatch:
        try:
            reader = pa.ipc.open_stream(pa.py_buffer(data), options=self._options)
            table = reader.read_all()
        except (pa.ArrowInvalid, OSError) as error:
            raise CorruptionError(f"{source}: records from {first} on are not rows written with "
                             f"encoding='arrow' for this schema ({error})") from None
        if self._columns is not None:
            table = table.select(self._columns)
        if table.num_rows != len(memoryview(offsets)) - 1:
            raise CorruptionError(f"{source}: records from {first} on hold "
                             f"{table.num_rows} rows, not one each")
        batch = table.combine_chunks().to_batches()
        batch = batch[0] if batch else pa.RecordBatch.from_pylist([], schema=self._storage)
        if batch.schema != self.schema:
            batch = from_storage(batch, self.schema)
        return batch


class JsonDecoder:
    """Records that are JSON objects, parsed by pyarrow; the schema comes
    from the schema file when there is one, else from the first batch."""

    prefix = b""

    def __init__(self, schema: pa.Schema | None, columns: Sequence[str] | None) -> None:
        self.schema = schema
        self._written = schema  # the schema file's, to convert to
        self._columns = list(columns) if columns is not None else None

    def decode(self, data: Any, offsets: Any, source: str, first: int) -> pa.RecordBatch:
        parse_schema = self.schema
        if self._written is not None:
            parse_schema = json_parse_schema(self._written)
        options = pa_json.ParseOptions(
            explicit_schema=parse_schema, newlines_in_values=True,
            unexpected_field_behavior="error" if parse_schema is not None else "infer")
        count = len(memoryview(offsets)) - 1
        try:
            table = pa_json.read_json(pa.BufferReader(pa.py_buffer(data)),
                                      parse_options=options)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as error:
            # pyarrow parses no "NaN" text where a number belongs: rows
            # holding one are parsed here instead.
            table = _parse_with_non_finite(data, offsets, parse_schema) if parse_schema else None
            if table is None:
                raise _bad_json(data, offsets, source, first, error) from None
        if table.num_rows != count:
            raise _bad_json(data, offsets, source, first,
                            f"{count} records gave {table.num_rows} objects")
        if self._written is not None:
            try:
                table = from_json_table(table, self._written, restore_dictionaries)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise CorruptionError(f"{source}: records from {first} on do not convert to the "
                                 f"written schema ({error})") from None
        if self.schema is None:
            self.schema = table.schema
        if self._columns is not None:
            table = table.select(self._columns)
        batches = table.combine_chunks().to_batches()
        return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)

    def output_schema(self) -> pa.Schema | None:
        if self.schema is None or self._columns is None:
            return self.schema
        return pa.schema([self.schema.field(c) for c in self._columns])


def _parse_with_non_finite(data: Any, offsets: Any, schema: pa.Schema) -> pa.Table | None:
    """The records as a table of `schema`, parsed by Python's json with the
    texts of NaN and infinities in float places as floats (see
    _json_types); None when a record is not a JSON object of `schema`'s
    fields that fits it."""
    view, ends = memoryview(data), memoryview(offsets)
    types = {field.name: field.type for field in schema}
    rows = []
    for k in range(len(ends) - 1):
        try:
            row = json.loads(bytes(view[ends[k]:ends[k + 1]]))
            if not isinstance(row, dict) or not row.keys() <= types.keys():
                return None
            rows.append({key: parse_non_finite(value, types[key]) for key, value in row.items()})
        except ValueError:
            return None
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def _bad_json(data: Any, offsets: Any, source: str, first: int, error: Any) -> CorruptionError:
    """The error naming the first record that is not a JSON object (or the
    one that disagrees with the schema)."""
    view, ends = memoryview(data), memoryview(offsets)
    for k in range(len(ends) - 1):
        text = bytes(view[ends[k]:ends[k + 1]])
        try:
            value = json.loads(text)
        except ValueError as parse_error:
            return CorruptionError(f"{source}: record {first + k} is not JSON ({parse_error})")
        if not isinstance(value, dict):
            return CorruptionError(f"{source}: record {first + k} is JSON but not an object")
    return CorruptionError(f"{source}: records from {first} on do not fit one schema ({error})")


class CallableDecoder:
    """A user function maps each batch of records (a large_binary array) to
    a RecordBatch (or Table, or struct array); the first batch fixes the
    schema."""

    prefix = b""

    def __init__(self, decode: Callable[[pa.LargeBinaryArray], Any]) -> None:
        self._decode = decode
        self.schema: pa.Schema | None = None

    def decode(self, data: Any, offsets: Any, source: str, first: int) -> pa.RecordBatch:
        records = records_array(data, offsets)
        result = self._decode(records)
        if isinstance(result, pa.Table):
            result = result.combine_chunks().to_batches()
            result = result[0] if result else None
        elif isinstance(result, pa.StructArray):
            result = pa.RecordBatch.from_struct_array(result)
        if not isinstance(result, pa.RecordBatch):
            raise TypeError("the decode function must return a pyarrow RecordBatch, Table or "
                            f"StructArray, not {type(result).__name__}")
        if result.num_rows != len(records):
            raise ValueError(f"the decode function returned {result.num_rows} rows for "
                             f"{len(records)} records")
        if self.schema is None:
            self.schema = result.schema
        elif result.schema != self.schema:
            result = result.cast(self.schema)
        return result


def make_decoder(decode: Any, schema: pa.Schema | None, columns: Sequence[str] | None) -> Any:
    """The decoder for read_batches' `decode`, given the stored schema."""
    if decode is None:
        if columns is not None:
            raise ValueError("columns= needs decode='row', 'arrow' or 'json'")
        return RawDecoder()
    if callable(decode):
        if columns is not None:
            raise ValueError("columns= needs decode='row', 'arrow' or 'json'")
        return CallableDecoder(decode)
    if decode == ROW_ENCODING:
        assert schema is not None
        return NativeRowDecoder(schema, columns)
    if decode == "arrow":
        assert schema is not None
        return ArrowRowDecoder(schema, columns)
    if decode == "json":
        return JsonDecoder(schema, columns)
    raise ValueError("decode must be 'auto', 'raw' (or None), 'row', 'arrow', 'json' or a "
                     f"function, not {decode!r}")
