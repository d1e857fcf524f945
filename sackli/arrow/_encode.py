"""Rows to records: each encoder turns a RecordBatch into its records laid
out together, as (data, int64 offsets): record k is data[offsets[k]:
offsets[k + 1]]. The Writer takes that in one call, with no Python object
per record."""

from __future__ import annotations

import struct
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from ._json_types import dump_row, to_json_batch
from ._row_codec import ROW_ENCODING, NativeRowEncoder
from ._types import storage_schema, to_storage

__all__ = ["Packed", "make_encoder"]

Packed = tuple[Any, memoryview]  # (data buffer, int64 offsets)

_BINARY_TYPES = (pa.types.is_binary, pa.types.is_string, pa.types.is_large_binary,
                 pa.types.is_large_string)


def _offsets_of(array: pa.Array) -> memoryview:
    """The offsets of a binary-like array as an int64 memoryview."""
    offsets = pa.Array.from_buffers(
        pa.int32() if pa.types.is_binary(array.type) or pa.types.is_string(array.type)
        else pa.int64(),
        len(array) + 1, [None, array.buffers()[1]], offset=array.offset)
    if offsets.type != pa.int64():
        offsets = offsets.cast(pa.int64())
    return _int64_view(offsets)


def _int64_view(array: pa.Array) -> memoryview:
    """A contiguous int64 memoryview of an int64 array without nulls."""
    buffer = array.buffers()[1]
    start = array.offset * 8
    return memoryview(buffer)[start:start + 8 * len(array)].cast("q")


def pack(records: list[bytes]) -> Packed:
    """Records given one by one, laid out together."""
    lengths = pa.array([len(r) for r in records], pa.int64())
    ends = pc.cumulative_sum(lengths) if len(records) else lengths
    offsets = pa.concat_arrays([pa.array([0], pa.int64()), ends])
    return b"".join(records), _int64_view(offsets)


def _packed_binary(array: pa.Array) -> Packed:
    """The values of a binary-like array, without a copy."""
    return array.buffers()[2] or b"", _offsets_of(array)


class ColumnEncoder:
    """Each value of one binary or string column becomes a record, byte for
    byte."""

    def __init__(self, schema: pa.Schema, column: str, skip_nulls: bool) -> None:
        if column not in schema.names:
            raise KeyError(f"no column {column!r} (columns: {', '.join(schema.names)})")
        value_type = schema.field(column).type
        if pa.types.is_dictionary(value_type):
            value_type = value_type.value_type
        if pa.types.is_fixed_size_binary(value_type) or pa.types.is_binary_view(
                value_type) or pa.types.is_string_view(value_type):
            self._cast: pa.DataType | None = pa.large_binary()
        elif any(check(value_type) for check in _BINARY_TYPES):
            self._cast = None if value_type == schema.field(column).type else value_type
        else:
            raise TypeError(f"column {column!r} is {value_type}; column= takes a binary or "
                            "string column (or use encoding= to encode whole rows)")
        self._column = column
        self._skip_nulls = skip_nulls
        self.rows_seen = 0

    def encode(self, batch: pa.RecordBatch) -> Packed:
        array = batch.column(self._column)
        if self._cast is not None:
            array = array.cast(self._cast)
        if array.null_count:
            if not self._skip_nulls:
                first = pc.index(pc.is_null(array), True).as_py()
                raise ValueError(
                    f"column {self._column!r} is null at row {self.rows_seen + first}; "
                    "pass skip_nulls=True to leave null values out")
            array = pc.drop_null(array)
        self.rows_seen += batch.num_rows
        return _packed_binary(array)


class ArrowRowEncoder:
    """Each row becomes a one-row Arrow IPC record batch message (schema
    kept aside): lossless for every Arrow type."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self._storage = storage_schema(schema)

    def encode(self, batch: pa.RecordBatch) -> Packed:
        if self._storage != batch.schema:
            batch = to_storage(batch, self._storage)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self._storage) as writer:
            writer.write_table(pa.Table.from_batches([batch]), max_chunksize=1)
        stream = sink.getvalue()
        offsets = _message_offsets(stream, batch.num_rows)
        return stream, offsets


def _message_offsets(stream: pa.Buffer, rows: int) -> memoryview:
    """Offsets of the record batch messages of an IPC stream (after its
    schema message, before its end marker)."""
    view = memoryview(stream)
    ends = _message_ends(view, fast=True)
    if len(ends) != rows + 1:
        ends = _message_ends(view, fast=False)
    if len(ends) != rows + 1:
        raise AssertionError(f"an IPC stream of {rows} rows held {len(ends) - 1} batches")
    return _int64_view(pa.array(ends, pa.int64()))


def _message_ends(view: memoryview, fast: bool) -> list[int]:
    """Where each message of an IPC stream ends. With `fast`, messages whose
    metadata is as long as the first batch's are taken to keep bodyLength
    where it keeps it (one writer, one schema: the same flatbuffer layout);
    the caller checks the count and parses fully otherwise."""
    ends: list[int] = []
    position = 0
    known_size, known_field = -1, 0
    unpack = struct.unpack_from
    while position + 8 <= len(view):
        metadata_size = unpack("<i", view, position + 4)[0]
        if metadata_size <= 0:
            break  # end of stream
        if fast and metadata_size == known_size and known_field:
            body = unpack("<q", view, position + 8 + known_field)[0]
        else:
            metadata = view[position + 8:position + 8 + metadata_size]
            field = _body_length_offset(metadata)
            body = unpack("<q", metadata, field)[0] if field else 0
            if ends:  # the schema message comes first and has another layout
                known_size, known_field = metadata_size, field
        position += 8 + metadata_size + body
        ends.append(position)
    return ends


def _body_length_offset(metadata: memoryview) -> int:
    """Where Message.bodyLength (field 3) is in an Arrow IPC message's
    flatbuffer metadata; 0 when it is absent (an empty body)."""
    table = struct.unpack_from("<I", metadata, 0)[0]
    vtable = table - struct.unpack_from("<i", metadata, table)[0]
    vtable_size = struct.unpack_from("<H", metadata, vtable)[0]
    slot = 4 + 2 * 3
    if vtable_size <= slot:
        return 0
    field = struct.unpack_from("<H", metadata, vtable + slot)[0]
    return table + field if field else 0


class JsonRowEncoder:
    """Each row becomes one JSON object (UTF-8, no trailing newline); the
    columns JSON has no type for are converted first (see _json_types)."""

    def encode(self, batch: pa.RecordBatch) -> Packed:
        return pack([dump_row(row).encode() for row in to_json_batch(batch).to_pylist()])


class CallableEncoder:
    """A user function encodes each batch: it returns one record per row, as
    a binary or string Arrow array or a sequence of bytes-like objects."""

    def __init__(self, encode: Callable[[pa.RecordBatch], Any]) -> None:
        self._encode = encode

    def encode(self, batch: pa.RecordBatch) -> Packed:
        records = self._encode(batch)
        if isinstance(records, pa.ChunkedArray):
            records = records.combine_chunks()
        if isinstance(records, pa.Array):
            if not any(check(records.type) for check in _BINARY_TYPES):
                records = records.cast(pa.large_binary())
            if records.null_count:
                raise ValueError("the encoding function returned null records")
            packed = _packed_binary(records)
        else:
            packed = pack([bytes(r) if not isinstance(r, bytes) else r for r in records])
        if len(packed[1]) - 1 != batch.num_rows:
            raise ValueError(f"the encoding function returned {len(packed[1]) - 1} records "
                             f"for a batch of {batch.num_rows} rows; it must return one per row")
        return packed


def make_encoder(schema: pa.Schema, column: str | None, encoding: Any,
                 skip_nulls: bool) -> Any:
    """The encoder for write_table's `column` and `encoding` arguments."""
    if column is not None:
        return ColumnEncoder(schema, column, skip_nulls)
    if callable(encoding):
        return CallableEncoder(encoding)
    if encoding == ROW_ENCODING:
        return NativeRowEncoder(schema)
    if encoding == "arrow":
        return ArrowRowEncoder(schema)
    if encoding == "json":
        return JsonRowEncoder()
    raise ValueError(f"encoding must be 'auto', 'row', 'arrow', 'json' or a function, "
                     f"not {encoding!r}")
