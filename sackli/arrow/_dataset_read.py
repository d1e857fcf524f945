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
from .._bulk import records_per_batch
from ..datasets import DatasetReader, ShardedDatasetReader
from ..datasets._fields import type_text
from ..datasets._layout import (
    FieldRefs, ShardFiles, dataset_folders, read_field_refs, reader_folders,
)
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


# A batch: the shard, the rows to read in it (a range or an int64 array),
# and those rows' indices in the dataset.
Piece = tuple[ShardFiles, Any, Any]


def _shard_pieces(shards: list[ShardFiles], fields: list[str], batch_size: int | None,
                  ) -> Iterator[Piece]:
    """Every datapoint, shard after shard, in batches."""
    first = 0
    for shard in shards:
        size = batch_size or _default_batch_size(shard, fields)
        for start in range(0, len(shard), size):
            rows = range(start, min(start + size, len(shard)))
            yield shard, rows, range(first + rows.start, first + rows.stop)
        first += len(shard)


def _global_indices(np: Any, indices: Any, total: int) -> Any:
    """`indices` (list, range, slice, numpy or Arrow array) as an int64
    array of valid indices (negative ones counted from the end).

    Raises TypeError for non-integers, IndexError naming the first index
    outside the dataset."""
    if isinstance(indices, slice):
        indices = range(total)[indices]
    if isinstance(indices, (pa.Array, pa.ChunkedArray)):
        indices = indices.to_numpy()
    elif not hasattr(indices, "__len__"):
        indices = list(indices)
    wanted = np.asarray(indices)
    if wanted.size == 0:
        return np.zeros(0, np.int64)
    if wanted.ndim != 1 or wanted.dtype.kind not in "iu":
        raise TypeError(f"indices must be integers, not {wanted.dtype} values")
    wanted = wanted.astype(np.int64)
    bad = np.flatnonzero((wanted < -total) | (wanted >= total))
    if len(bad):
        raise IndexError(f"datapoint index {int(wanted[bad[0]])} (indices[{int(bad[0])}]) out "
                         f"of range for {total} datapoints")
    return np.where(wanted < 0, wanted + total, wanted)


def _index_pieces(shards: list[ShardFiles], fields: list[str], indices: Any,
                  batch_size: int | None) -> Iterator[Piece]:
    """The datapoints at `indices`, in that order, in batches that each
    stay in one shard."""
    np = numpy_for_datasets()
    lengths = np.array([len(shard) for shard in shards], np.int64)
    stops = np.cumsum(lengths)
    wanted = _global_indices(np, indices, int(stops[-1]))
    shard_of = np.searchsorted(stops, wanted, side="right")
    local = wanted - (stops - lengths)[shard_of]
    size = batch_size or _default_batch_size(shards[0], fields)
    cuts = [0, *(np.flatnonzero(np.diff(shard_of)) + 1).tolist(), len(wanted)]
    for begin, end in itertools.pairwise(cuts):
        for start in range(begin, end, size):
            stop = min(start + size, end)
            yield shards[int(shard_of[start])], local[start:stop], wanted[start:stop]


def _default_batch_size(shard: ShardFiles, fields: list[str]) -> int:
    per_datapoint = sum(shard.field_readers[f].stored_bytes for f in fields) / max(len(shard), 1)
    return records_per_batch(_BATCH_BYTES, per_datapoint)


def _read_piece(piece: Piece, fields: list[str], decode: bool, schema: pa.Schema,
                index_column: str | None) -> pa.RecordBatch:
    np = numpy_for_datasets()
    shard, rows, positions = piece
    refs = read_field_refs(shard, rows, fields)
    columns = [_field_column(np, shard, refs[field], decode) for field in fields]
    if index_column is not None:
        columns.append(pa.array(np.asarray(positions, np.int64)))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def dataset_batches(
    folders: list[str], fields: Sequence[str] | None, decode: bool,
    batch_size: int | None, index_column: str | None, indices: Any = None,
) -> pa.RecordBatchReader:
    """The datapoints of these shard folders (all, or those at `indices`)
    as record batches of the requested fields (see sackli.arrow.read_batches)."""
    shards = _open_shards(folders, fields)
    try:
        selected = list(shards[0].field_readers)
        schema = dataset_schema(shards[0], decode)
        if index_column is not None:
            if index_column in schema.names:
                raise ValueError(f"with_index={index_column!r}: a field has that name already")
            schema = schema.append(pa.field(index_column, pa.int64(), nullable=False))
        pieces = (_shard_pieces(shards, selected, batch_size) if indices is None else
                  _index_pieces(shards, selected, indices, batch_size))
        # Bad indices raise here, not at the first batch.
        first_piece = next(pieces, None)
    except BaseException:
        for shard in shards:
            shard.close()
        raise
    if first_piece is not None:
        pieces = itertools.chain([first_piece], pieces)

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
