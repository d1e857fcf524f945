"""Dataset folders (`sackli.datasets`) out as Arrow: one column per field.

A batch of datapoints costs one engine read of their refs and one per
requested field (the items of every list in the batch gathered into one
request); other fields' files are opened for their offsets only, never read.
Values decode with vector operations (see _field_arrays); the next batch is
read while the current one is consumed.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
from typing import Any, Iterator, Sequence

import pyarrow as pa

from .. import _bulk
from .._batching import records_per_batch
from ..datasets._codecs import needs_numpy
from ..datasets import DatasetReader, ShardedDatasetReader
from ..datasets._recognise import AnyDatasetReader, open_dataset, shard_readers
from ..datasets._ref_columns import FieldRefs, ShardFiles, read_field_refs
from ._field_arrays import field_arrow_type, field_values

__all__ = ["dataset_batches", "dataset_schema", "open_dataset_source"]

# A batch holds about this many stored bytes of the requested fields.
_BATCH_BYTES = 16 << 20


def open_dataset_source(source: Any) -> tuple[AnyDatasetReader, bool] | None:
    """(reader, whether we opened it) when `source` is a dataset reader or
    names a dataset folder (see sackli.datasets._recognise), else None."""
    if isinstance(source, (DatasetReader, ShardedDatasetReader)):
        if len(source) != sum(len(shard) for shard in shard_readers(source)):
            raise ValueError("sackli.arrow reads whole datasets, not views (r[a:b]) of them")
        return source, False
    if isinstance(source, (str, os.PathLike)):
        reader = open_dataset(source)
        if reader is not None:
            return reader, True
    return None


def _selected_fields(shards: list[ShardFiles], fields: Sequence[str] | None) -> list[str]:
    """The requested fields (all, in spec order, for None), checked against
    every shard's spec."""
    spec = shards[0].fields
    if fields is None:
        fields = list(spec)
    elif isinstance(fields, str):
        raise TypeError(f"fields must be a list of field names, not the str {fields!r}")
    fields = list(fields)
    for field in fields:
        if field not in spec:
            raise ValueError(
                f"{shards[0].directory}: no field {field!r} in the dataset; its fields are "
                f"{', '.join(map(repr, spec)) or 'none'}")
    if len(set(fields)) != len(fields):
        raise ValueError(f"fields names a field twice: {fields}")
    for shard in shards[1:]:
        for field in fields:
            if shard.fields.get(field) != spec[field]:
                raise ValueError(
                    f"{shard.directory}: field {field!r} is {shard.fields.get(field)!r} there "
                    f"but {spec[field]!r} in {shards[0].directory}: shards must share a spec")
    return fields


def dataset_schema(shards: list[ShardFiles], fields: list[str], decode: bool) -> pa.Schema:
    """The schema of the tables read from these shards' fields."""
    spec = shards[0].fields
    return pa.schema([pa.field(field, field_arrow_type(spec[field], decode), nullable=False)
                      for field in fields])


def _item_indices(np: Any, refs: FieldRefs) -> tuple[Any, Any | None]:
    """(record indices of every value, list offsets or None) of a field."""
    if refs.lengths is None:
        return refs.starts, None
    lengths = refs.lengths
    list_offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=list_offsets[1:])
    total = int(list_offsets[-1])
    # Each list's items: its start, then one after another.
    indices = np.repeat(refs.starts - list_offsets[:-1], lengths) + np.arange(total)
    return indices, list_offsets


def _read_records(np: Any, shard: ShardFiles, field: str, indices: Any) -> tuple[Any, Any]:
    """Packed records at `indices` of a field's file: one range read when
    they follow each other (as written), else one batch read."""
    reader = shard.field_readers[field]
    if len(indices) and int(indices[-1]) - int(indices[0]) == len(indices) - 1 and \
            bool((np.diff(indices) == 1).all()):
        return _bulk.read_packed(reader, int(indices[0]), len(indices))
    return _bulk.start_read_indices(reader, indices).packed()


def _field_column(np: Any, shard: ShardFiles, refs: FieldRefs, decode: bool) -> pa.Array:
    field, ftype = refs.field, shard.fields[refs.field]
    indices, list_offsets = _item_indices(np, refs)
    data, offsets = _read_records(np, shard, field, indices)
    values = field_values(ftype, decode, data, offsets, f"field {field!r} ({shard.path(field)})",
                          lambda k: int(indices[k]))
    if list_offsets is None:
        return values
    return pa.ListArray.from_arrays(pa.array(list_offsets), values,
                                    type=field_arrow_type(ftype, decode))


def _shard_pieces(shards: list[ShardFiles], fields: list[str], batch_size: int | None,
                  ) -> Iterator[tuple[int, ShardFiles, int, int]]:
    """(first global index, shard, start, count) of every batch."""
    first = 0
    for shard in shards:
        size = batch_size or _default_batch_size(shard, fields)
        for start in range(0, len(shard), size):
            yield first + start, shard, start, min(size, len(shard) - start)
        first += len(shard)


def _default_batch_size(shard: ShardFiles, fields: list[str]) -> int:
    per_datapoint = sum(shard.field_readers[f].stored_bytes for f in fields) / max(len(shard), 1)
    return records_per_batch(_BATCH_BYTES, per_datapoint)


def _read_piece(piece: tuple[int, ShardFiles, int, int], fields: list[str], decode: bool,
                schema: pa.Schema, index_column: str | None) -> pa.RecordBatch:
    np = needs_numpy()
    first, shard, start, count = piece
    refs = read_field_refs(shard, start, count, fields)
    columns = [_field_column(np, shard, refs[field], decode) for field in fields]
    if index_column is not None:
        columns.append(pa.array(np.arange(first, first + count, dtype=np.int64)))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def dataset_batches(
    reader: AnyDatasetReader, fields: Sequence[str] | None, decode: bool,
    batch_size: int | None, index_column: str | None, close: bool,
) -> pa.RecordBatchReader:
    """The dataset's datapoints as record batches of the requested fields
    (see sackli.arrow.read_batches)."""
    shards = [ShardFiles(shard) for shard in shard_readers(reader)]
    selected = _selected_fields(shards, fields)
    schema = dataset_schema(shards, selected, decode)
    if index_column is not None:
        if index_column in schema.names:
            raise ValueError(f"with_index={index_column!r}: a field has that name already")
        schema = schema.append(pa.field(index_column, pa.int64(), nullable=False))
    pieces = _shard_pieces(shards, selected, batch_size)

    def batches() -> Iterator[pa.RecordBatch]:
        # One batch is read ahead (the engine releases the GIL) while the
        # consumer works on the current one.
        executor = concurrent.futures.ThreadPoolExecutor(1, "sackli-dataset-arrow")
        try:
            futures = (executor.submit(_read_piece, piece, selected, decode, schema,
                                       index_column) for piece in pieces)
            pending = next(futures, None)
            if pending is None:
                return
            for following in itertools.chain(futures, [None]):
                assert pending is not None
                batch = pending.result()
                pending = following
                yield batch
        finally:
            executor.shutdown(wait=True, cancel_futures=True)
            if close:
                reader.close()

    return pa.RecordBatchReader.from_batches(schema, batches())
