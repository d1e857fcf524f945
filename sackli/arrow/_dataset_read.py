"""Dataset folders (`sackli.datasets`) out as Arrow: one column per field.

A batch of datapoints costs one engine read of their refs and one per
requested field (the items of every list in the batch gathered into one
request); other fields' files are not even opened.
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
from ..datasets import DatasetReader, ShardedDatasetReader
from ..datasets._recognise import dataset_folders, reader_folders
from ..datasets._ref_columns import FieldRefs, ShardFiles, read_field_refs
from ..datasets._type_text import type_text
from ._field_arrays import field_arrow_type, field_values, numpy_for_datasets

__all__ = ["dataset_batches", "dataset_schema", "dataset_source_folders"]

# A batch holds about this many stored bytes of the requested fields.
_BATCH_BYTES = 16 << 20


def dataset_source_folders(source: Any) -> list[str] | None:
    """The shard folders to read when `source` is a dataset reader or names
    a dataset folder (see sackli.datasets._recognise), else None."""
    if isinstance(source, (DatasetReader, ShardedDatasetReader)):
        return reader_folders(source)
    if isinstance(source, (str, os.PathLike)):
        return dataset_folders(source)
    return None


def _open_shards(folders: list[str], fields: Sequence[str] | None) -> list[ShardFiles]:
    """Each shard's refs.bag and requested fields' files, opened; the
    fields checked against every shard's spec."""
    if isinstance(fields, str):
        raise TypeError(f"fields must be a list of field names, not the str {fields!r}")
    if fields is not None and len(set(fields)) != len(list(fields)):
        raise ValueError(f"fields names a field twice: {list(fields)}")
    shards: list[ShardFiles] = []
    try:
        for folder in folders:
            # Every shard opens the fields of the first (all of its fields by default).
            chosen = fields if not shards else list(shards[0].field_readers)
            shards.append(ShardFiles(folder, chosen))
            first, last = shards[0], shards[-1]
            for field in last.field_readers:
                if last.fields[field] != first.fields[field]:
                    raise ValueError(
                        f"{last.directory}: field {field!r} is {type_text(last.fields[field])} "
                        f"there but {type_text(first.fields[field])} in {first.directory}: "
                        "shards must share a spec")
    except BaseException:
        for shard in shards:
            shard.close()
        raise
    return shards


def dataset_schema(shard: ShardFiles, decode: bool) -> pa.Schema:
    """The schema of the tables read from a shard's opened fields."""
    return pa.schema([pa.field(field, field_arrow_type(shard.fields[field], decode),
                               nullable=False) for field in shard.field_readers])


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
    np = numpy_for_datasets()
    first, shard, start, count = piece
    refs = read_field_refs(shard, start, count, fields)
    columns = [_field_column(np, shard, refs[field], decode) for field in fields]
    if index_column is not None:
        columns.append(pa.array(np.arange(first, first + count, dtype=np.int64)))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def dataset_batches(
    folders: list[str], fields: Sequence[str] | None, decode: bool,
    batch_size: int | None, index_column: str | None,
) -> pa.RecordBatchReader:
    """The datapoints of these shard folders as record batches of the
    requested fields (see sackli.arrow.read_batches)."""
    shards = _open_shards(folders, fields)
    try:
        selected = list(shards[0].field_readers)
        schema = dataset_schema(shards[0], decode)
        if index_column is not None:
            if index_column in schema.names:
                raise ValueError(f"with_index={index_column!r}: a field has that name already")
            schema = schema.append(pa.field(index_column, pa.int64(), nullable=False))
    except BaseException:
        for shard in shards:
            shard.close()
        raise
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
            for shard in shards:
                shard.close()

    return pa.RecordBatchReader.from_batches(schema, batches())
