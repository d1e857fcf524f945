"""read_batches / read_table: bag records out as Arrow."""

from __future__ import annotations

import concurrent.futures
import itertools
import os
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa

from .. import Reader
from .. import _bulk
from .._bulk import records_per_batch
from ._dataset_read import dataset_batches, dataset_source_folders
from ._set_rows import resolve_rows
from ._types import concat_batches

__all__ = ["read_batches", "read_table"]

# A batch holds about this many stored bytes (and at most _MAX_BATCH rows).
_BATCH_BYTES = 16 << 20
_MAX_BATCH = 65536
_INDEX_COLUMN = "index"


def _as_reader(source: Any) -> tuple[Reader, bool]:
    """(reader, whether we opened it) for a Reader or a file spec."""
    if isinstance(source, Reader):
        return source, False
    if isinstance(source, (str, os.PathLike)):
        return Reader(source), True
    raise TypeError(f"source must be a sackli.Reader or a file spec, not {type(source).__name__}")


def _default_batch_size(reader: Reader) -> int:
    return records_per_batch(_BATCH_BYTES, reader.approximate_bytes_per_record(), _MAX_BATCH)


def _range_chunks(reader: Reader, batch_size: int) -> Iterator[tuple[int, int]]:
    """(start, count) pieces of the whole reader; where neighbouring records
    are neighbours on disk, no piece spans two files."""
    cuts = [0, *(_bulk.shard_boundaries(reader) or []), len(reader)]
    for begin, end in itertools.pairwise(cuts):
        for start in range(begin, end, batch_size):
            yield start, min(batch_size, end - start)


def _as_index_list(indices: Any, length: int) -> Sequence[int]:
    """Indices as a sliceable sequence (numpy arrays and lists stay as they
    are; Arrow arrays and other iterables become lists)."""
    if isinstance(indices, (pa.Array, pa.ChunkedArray)):
        return indices.to_pylist()
    if isinstance(indices, slice):
        return range(length)[indices]
    if hasattr(indices, "__len__") and hasattr(indices, "__getitem__"):
        return indices
    return list(indices)


def _split(count: int, parts: int) -> list[tuple[int, int]]:
    """[begin, end) bounds of `parts` near-equal parts of range(count)."""
    parts = max(1, min(parts, count))
    return [(count * p // parts, count * (p + 1) // parts) for p in range(parts)]


class _Batches:
    """Reads pieces of a reader with one piece always in flight, and decodes
    them; iterating gives RecordBatches.

    Decoders whose pyarrow work releases the GIL (`parallel`) get each piece
    in parts, read and decoded side by side on several threads."""

    def __init__(self, reader: Reader, decoder: Any, indices: Any, batch_size: int,
                 with_index: str | None, close_reader: bool) -> None:
        self._reader = reader
        self._decoder = decoder
        self._parts = reader.options.max_parallelism if getattr(decoder, "parallel", False) else 1
        self._batch_size = batch_size
        self._with_index = with_index
        self._close_reader = close_reader
        self._source = reader.file_spec
        if indices is None:
            self._pieces: Iterator[Any] = (("range", s, n) for s, n in
                                           _range_chunks(reader, batch_size))
        else:
            listed = _as_index_list(indices, len(reader))
            self._pieces = (("indices", s, listed[s:s + batch_size])
                            for s in range(0, len(listed), batch_size))

    def _start(self, piece: Any) -> list[tuple[int, Any]]:
        """Starts reading a piece: [(first record, pending read or buffers)]
        for each of its parts."""
        kind, start, what = piece
        prefix = self._decoder.prefix
        if kind == "range":
            if not prefix and self._parts == 1:
                mapped = _bulk.mapped_run(self._reader, start, what)
                if mapped is not None:
                    return [(start, mapped)]
            return [(start + a, _bulk.start_read_range(self._reader, start + a, b - a, prefix))
                    for a, b in _split(what, self._parts)]
        try:
            return [(start + a, _bulk.start_read_indices(self._reader, what[a:b], prefix))
                    for a, b in _split(len(what), self._parts)]
        except IndexError as error:
            raise IndexError(f"{error} (in the batch starting at indices[{start}])") from None

    def _decode(self, parts: list[tuple[int, Any]], executor: Any) -> list[pa.RecordBatch]:
        """The piece's rows, as one batch or (from decoders that cut a
        piece into parts themselves, `decode_parts`) several."""
        def decode(part: tuple[int, Any]) -> pa.RecordBatch:
            first, pending = part
            data, offsets = pending if isinstance(pending, tuple) else pending.packed()
            return self._decoder.decode(data, offsets, self._source, first)

        if len(parts) == 1 and hasattr(self._decoder, "decode_parts"):
            first, pending = parts[0]
            data, offsets = pending if isinstance(pending, tuple) else pending.packed()
            return self._decoder.decode_parts(data, offsets, self._source, first)
        if len(parts) == 1:
            return [decode(parts[0])]
        return [concat_batches(list(executor.map(decode, parts)))]

    def _positions(self, piece: Any) -> pa.Array:
        kind, start, what = piece
        if kind == "range":
            return pa.array(range(start, start + what), pa.int64())
        length = len(self._reader)
        return pa.array([i + length if i < 0 else i for i in map(int, what)], pa.int64())

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        executor = (concurrent.futures.ThreadPoolExecutor(self._parts, "sackli-decode")
                    if self._parts > 1 else None)
        try:
            piece = next(self._pieces, None)
            pending = self._start(piece) if piece is not None else None
            while piece is not None:
                following = next(self._pieces, None)
                upcoming = self._start(following) if following is not None else None
                positions = self._positions(piece) if self._with_index is not None else None
                done = 0
                for batch in self._decode(pending, executor):
                    if positions is not None:
                        batch = batch.append_column(
                            pa.field(self._with_index, pa.int64(), nullable=False),
                            positions[done:done + batch.num_rows])
                    done += batch.num_rows
                    yield batch
                piece, pending = following, upcoming
        finally:
            if executor is not None:
                executor.shutdown(wait=False)
            if self._close_reader:
                self._reader.close()


def _empty_schema_for(decoder: Any) -> pa.Schema:
    schema = getattr(decoder, "output_schema", lambda: decoder.schema)()
    return schema if schema is not None else pa.schema([])


def read_batches(
    source: Reader | str | os.PathLike[str],
    *,
    decode: str | Callable[[pa.LargeBinaryArray], Any] | None = "auto",
    columns: Sequence[str] | None = None,
    indices: Any = None,
    batch_size: int | None = None,
    with_index: bool | str = False,
    schema: pa.Schema | None = None,
    fields: Sequence[str] | None = None,
) -> pa.RecordBatchReader:
    """Reads bag records, or a dataset's fields, as a stream of Arrow
    record batches.

    Reads run on the engine's threads, one batch ahead of the consumer;
    memory stays bounded by a few batches. Uncompressed local bags are
    lent straight from the mapped file (no copy) where records lie
    together.

    Args:
      source: a `sackli.Reader` (or a slice of one) or a file spec; or a
        `sackli.datasets` dataset: a folder holding spec.json (one shard)
        or shard folders 000000/, ... (local, gs:// or s3://), or a
        DatasetReader / ShardedDatasetReader. A dataset gives one column
        per field (see docs/arrow.md); with it, `decode` is "auto" (decode
        the types Arrow has, e.g. int(8) -> uint64) or "raw" (the stored
        bytes), `indices` are datapoint indices (batches then stay within
        a shard), and `columns` and `schema` do not apply.
      fields: for a dataset, the fields to read, in this order (default:
        all, in spec order); only their files are read.
      decode: "raw" (or None): one `large_binary` column `record`, the
        records as they are. "row": the columns of rows written with
        `write_table(encoding="row")`, decoded by the engine. "arrow":
        Arrow rows of either codec, as the schema file says ("row", or
        one-row IPC messages written with `encoding="arrow"`). "json":
        records that are JSON objects, parsed (with the written schema
        when there is one). Or a function from a `large_binary` array of
        records to a RecordBatch. "auto" (the default, as for `sackli
        convert`): as the schema file beside the bag says ("row", "arrow"
        or "json"), "raw" without one.
      columns: with "row", "arrow" or "json", only these columns (in this
        order); "row" decodes only those columns of each row.
      indices: read only the records at these positions (a list, range,
        slice, numpy or Arrow array; negative counts from the end), in
        order; default all, in order.
      batch_size: records per batch (default: about 16 MiB stored). With
        "row", the engine decodes a large batch in parts side by side and
        each part comes out as a batch of its own (at least 2,048 rows).
      with_index: add an int64 column with each row's position in the
        reader (named `index`, or the string given).
      schema: for "row"/"arrow"/"json": with a schema file, a view of the
        stored schema, matched by name: a subset of its fields in any
        order, types widened where every value converts exactly (int32 ->
        int64, float32 -> float64, ...); anything else is a ValueError
        naming the first field that differs. Without a schema file, the
        rows' schema (records of another length are corruption).

    Returns:
      A `pyarrow.RecordBatchReader` (read it once).

    Raises:
      FileNotFoundError: the bag, or for "arrow" its schema file, is missing.
      sackli.CorruptionError: records that do not decode (a ValueError), naming
        the bag and record.
      ValueError: a `schema` that differs from the schema file (see above).
      IndexError: an index outside the reader.

    Example:
      >>> table = sackli.arrow.read_batches("events@8.bagz", decode="arrow").read_all()
    """
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, not {batch_size}")
    index_column = (_INDEX_COLUMN if with_index is True else
                    (with_index if isinstance(with_index, str) and with_index else None))
    folders = dataset_source_folders(source)
    if folders is not None:
        return _dataset_batches(folders, decode, columns, indices, schema, fields, batch_size,
                                index_column)
    if fields is not None:
        raise ValueError(f"fields= is for dataset folders, and {source!r} is a bag; for rows "
                         "written by write_table, select with columns=")
    reader, owned = _as_reader(source)
    try:
        decoder = resolve_rows(reader, decode, schema).decoder(columns)
        batches = iter(_Batches(reader, decoder, indices,
                                batch_size or _default_batch_size(reader), index_column, owned))
    except BaseException:
        if owned:
            reader.close()
        raise
    if decoder.schema is None:
        # Decoders that learn the schema from the data: decode one batch now.
        first = next(batches, None)
        if first is not None:
            batches = itertools.chain([first], batches)
        out_schema = first.schema if first is not None else _empty_schema_for(decoder)
    else:
        out_schema = _empty_schema_for(decoder)
        if index_column is not None:
            if index_column in out_schema.names:
                raise ValueError(f"with_index={index_column!r}: a column has that name already")
            out_schema = out_schema.append(pa.field(index_column, pa.int64(), nullable=False))
    return pa.RecordBatchReader.from_batches(out_schema, batches)


def _dataset_batches(folders: list[str], decode: Any, columns: Any, indices: Any, schema: Any,
                     fields: Any, batch_size: int | None, index_column: str | None,
                     ) -> pa.RecordBatchReader:
    for name, value in (("columns", columns), ("schema", schema)):
        if value is not None:
            raise ValueError(f"{name}= is for bags; a dataset ({folders[0]}) selects its "
                             "columns with fields=")
    if decode not in ("auto", "raw", None):
        raise ValueError(f"decode={decode!r}: a dataset is read with decode='auto' or 'raw'")
    return dataset_batches(folders, fields, decode == "auto", batch_size, index_column, indices)


def read_table(source: Reader | str | os.PathLike[str], **kwargs: Any) -> pa.Table:
    """`read_batches(source, **kwargs)` read whole into a `pyarrow.Table`."""
    return read_batches(source, **kwargs).read_all()
