"""Rows in the engine's own row format (`encoding="row"`, docs/format.md
"Arrow rows"): encoded from and decoded into Arrow arrays by the engine
through the Arrow C data interface, with no Python object per row.

The engine holds the storage types (dictionaries replaced by their values,
see _types); dictionary columns are re-encoded after decoding, as for IPC
rows (and given the set's recorded dictionaries by _set_rows). Schemas the
codec cannot hold (unions, maps, views, extension types, ...) are written as
IPC rows instead (`row_codec_unsupported`)."""

from __future__ import annotations

import os
from typing import Any, Sequence

import pyarrow as pa

from .._engine import RowCodec, row_codec_unsupported
from ._types import concat_batches, from_storage, storage_schema, to_storage

__all__ = ["ROW_ENCODING", "NativeRowDecoder", "NativeRowEncoder", "default_encoding",
           "unsupported_reason"]

ROW_ENCODING = "row"

# Engine threads per batch (the engine's pool is shared and sized lazily).
_PARALLELISM = max(1, os.cpu_count() or 1)


def unsupported_reason(schema: pa.Schema) -> str | None:
    """Why rows of `schema` cannot be written with encoding="row" (naming
    the column and type), or None when they can."""
    return row_codec_unsupported(storage_schema(schema).__arrow_c_schema__())


def default_encoding(schema: pa.Schema) -> str:
    """The row encoding new writes of `schema` use: "row" where the codec
    holds every column, else one-row IPC messages ("arrow")."""
    return ROW_ENCODING if unsupported_reason(schema) is None else "arrow"


def _codec_for(schema: pa.Schema) -> tuple[pa.Schema, Any]:
    """(storage schema, engine codec) for rows of `schema`; ValueError
    naming the column whose type the codec cannot hold."""
    storage = storage_schema(schema)
    reason = row_codec_unsupported(storage.__arrow_c_schema__())
    if reason is not None:
        raise ValueError(f"encoding='row' cannot hold this schema: {reason} "
                         "(use encoding='arrow' for such types)")
    return storage, RowCodec(storage.__arrow_c_schema__())


class NativeRowEncoder:
    """Each row becomes one record of the row format, encoded by the engine
    from the batch's Arrow C data arrays (parallel, GIL released)."""

    def __init__(self, schema: pa.Schema) -> None:
        self._storage, self._codec = _codec_for(schema)

    def encode(self, batch: pa.RecordBatch) -> tuple[Any, memoryview]:
        if batch.schema != self._storage:
            batch = to_storage(batch, self._storage)
        _, array = batch.__arrow_c_array__()
        data, offsets = self._codec.encode(array, _PARALLELISM)
        return data, memoryview(offsets)


class NativeRowDecoder:
    """Rows written with encoding="row", decoded by the engine straight
    into Arrow arrays, only the columns asked for, in parallel; the engine
    cuts a batch of records into parts, which come out as record batches
    of their own (`decode_parts`)."""

    prefix = b""

    def __init__(self, schema: pa.Schema, columns: Sequence[str] | None) -> None:
        storage, self._codec = _codec_for(schema)
        names = list(columns) if columns is not None else schema.names
        missing = [c for c in names if c not in schema.names]
        if missing:
            raise KeyError(f"no column {missing[0]!r} (columns: {', '.join(schema.names)})")
        self._indices = [schema.get_field_index(c) for c in names]
        self.schema = pa.schema([schema.field(i) for i in self._indices], metadata=schema.metadata)
        self._storage = pa.schema([storage.field(i) for i in self._indices],
                                  metadata=storage.metadata)

    def decode_parts(self, data: Any, offsets: Any, source: str,
                     first: int) -> list[pa.RecordBatch]:
        """The rows of records data[offsets[k]:offsets[k + 1]] as record
        batches, in order; CorruptionError naming `source` and the record
        (`first` + k) for a record that is not such a row."""
        capsules = self._codec.decode(data, offsets, self._indices, _PARALLELISM, source, first)
        batches = [pa.RecordBatch._import_from_c_capsule(self._storage.__arrow_c_schema__(), c)
                   for c in capsules]
        if self._storage != self.schema:
            batches = [from_storage(batch, self.schema) for batch in batches]
        return batches

    def decode(self, data: Any, offsets: Any, source: str, first: int) -> pa.RecordBatch:
        """As `decode_parts`, in one record batch."""
        return concat_batches(self.decode_parts(data, offsets, source, first))
