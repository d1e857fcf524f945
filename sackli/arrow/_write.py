"""write_table: Arrow tables and Parquet into bag shards."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import os
import sys
from typing import Any, Callable, Iterator, Mapping

import pyarrow as pa

from .. import ShardedWriter
from .._bulk import WriterOptions
from .._sets import (
    check_shard_count, has_zstd_suffix, split_shard_entry, strip_local_prefix,
)
from .._storage import path_argument
from ._dataset_write import write_dataset_table
from ._dictionaries import DictionaryUnifier
from ._decode import RECORD_COLUMN, holds_raw_records
from ._encode import make_encoder
from ._inputs import open_table_stream
from ._literals import with_chosen_literals
from ._row_codec import ROW_ENCODING, default_encoding
from ._schema_file import schema_message

__all__ = ["write_table"]

# Rows are encoded in pieces of at most this many rows and about this size,
# so that memory stays bounded whatever the input's batches are.
_PIECE_ROWS = 8192
_PIECE_BYTES = 16 << 20


def _pieces(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        if batch.num_rows == 0:
            continue
        row_bytes = max(batch.nbytes / batch.num_rows, 1.0)
        rows = max(1, min(_PIECE_ROWS, int(_PIECE_BYTES / row_bytes)))
        for start in range(0, batch.num_rows, rows):
            yield batch.slice(start, rows)


# What a bag's name ends in: `.bag` (raw records) or `.bagz` (zstd).
_BAG_SUFFIXES = (".bag", ".bagz")


def _file_name(spec: str) -> str:
    """The name (or `name.ext` pattern) of the files `spec` (a path,
    `name@N.ext` or `name@*.ext`) writes."""
    sharded = split_shard_entry(strip_local_prefix(spec))
    return spec if sharded is None else sharded[2]


def _check_bag_name(spec: str) -> None:
    """Raises ValueError unless `spec` names a bag, so that
    `write_table(t, "x.parquet")` does not write a bag called x.parquet."""
    if not _file_name(spec).endswith(_BAG_SUFFIXES):
        raise ValueError(
            f"{spec}: write_table writes bags, whose names end in .bag (raw records) or .bagz "
            "(zstd), e.g. out.bagz, out@8.bagz or out@*.bagz; to write Parquet, use "
            "pyarrow.parquet.write_table")


def _progress_bar(total: int | None, enabled: bool | None) -> Any:
    from tqdm import tqdm

    show = sys.stderr.isatty() if enabled is None else enabled
    # Counts as integers ("0/1,000", not tqdm's scaled "0.00/1.00k"), then the ETA.
    bar_format = ("{desc}{percentage:3.0f}%|{bar}| {n:,}/{total:,} [{elapsed}<{remaining}, {rate_fmt}]"
                  if total is not None else "{desc}{n:,}{unit} [{elapsed}, {rate_fmt}]")
    return tqdm(total=total, unit=" rows", unit_scale=True, file=sys.stderr,
                disable=not show, leave=False, bar_format=bar_format)


def write_table(
    data: Any,
    file_spec: str | os.PathLike[str],
    *,
    column: str | None = None,
    encoding: str | Callable[[pa.RecordBatch], Any] = "auto",
    skip_nulls: bool = False,
    options: WriterOptions | None = None,
    max_shard_bytes: int | None = None,
    progress: bool | None = None,
    spec: Mapping[str, str] | str | None = None,
    durable: bool = False,
    overwrite: bool = False,
    **dataset_options: Any,
) -> list[str]:
    """Writes the rows of an Arrow table (or Parquet data) to bag shards,
    or, given `spec`, to a `sackli.datasets` dataset folder.

    Input is streamed batch by batch, so a dataset larger than memory
    converts in bounded memory; compression runs on the engine's threads
    while the next rows are encoded.

    Args:
      data: a `pyarrow.Table`, `RecordBatch`, `RecordBatchReader`,
        `pyarrow.dataset.Dataset`, the path of a Parquet file or of a folder
        of them, or any object with `__arrow_c_stream__` (a Polars DataFrame,
        a DuckDB result).
      file_spec: `out.bagz`; `out@8.bagz` (8 shards of contiguous runs of
        rows, as even as possible); or `out@*.bagz` with `max_shard_bytes`
        (as many shards as needed). `.bagz` compresses with zstd.
      column: write each value of this binary or string column as one
        record, byte for byte, instead of encoding rows.
      encoding: how a row becomes a record, without `column`: "row" (the
        engine's row format, docs/format.md: compact, encoded and decoded
        in parallel without Python per row; lossless for the types it
        holds: numbers, booleans, strings, binaries, temporal types,
        decimals, dictionaries, lists, structs, nulls), "arrow" (a one-row
        Arrow IPC message: lossless for every Arrow type, but large and
        slow), "json" (a JSON object), or a function from a RecordBatch to
        one record per row (a binary Arrow array or a sequence of bytes).
        "auto" (the default) is "row" where the schema allows it and
        "arrow" otherwise (unions, maps, extension types, ...), except for a
        table of raw records, whose only column is a binary `record` (what
        `read_table` gives for a bag without a schema): its values are
        written as they are, as with `column="record"`, so bag -> table ->
        bag is the identity. For "row", "arrow" and "json" the schema (and
        the encoding used) is written once per set, beside the shards:
        `<name>.<ext>.arrow_schema`, or `<name>-of-0000N.<ext>.arrow_schema`
        for a set of N shards.
      skip_nulls: with `column`, leave null values out instead of raising.
      options: a `sackli.Writer.Options` for every shard. When they leave
        compression to the suffix (none given, or CompressionAutoDetect),
        row-encoded `.bagz` shards are compressed at zstd level 3 with
        literals chosen on the first (up to 1,000) rows: stored raw when
        Huffman coding them would save under 3% of the size (short binary
        rows: several times faster), Huffman-coded otherwise (text-heavy
        rows). An explicit CompressionZstd is used as given.
      max_shard_bytes: with `out@*.ext`, the most bytes a shard should
        take (a record larger than that gets a shard alone).
      progress: show a progress bar (default: when stderr is a terminal).
      spec: write a dataset instead: `file_spec` is then a dataset folder
        (local, gs:// or s3://) that gets one field per column, each row a
        datapoint, as `sackli.datasets.ShardedDatasetWriter` writes it (the
        files `bags` 0.5.1 writes for those datapoints). `spec` maps column
        names to field types (e.g. {"image": "jpeg"}); the other columns'
        types are inferred from their Arrow types ("auto": all of them; see
        docs/arrow.md). `dataset_options`: `encoders`, `compression` (as for
        DatasetWriter), `shard_length`, `shard_size` (as for
        ShardedDatasetWriter; default 10 GiB) and `sharded=False` to write one
        shard folder (spec.json directly in `file_spec`). `column`,
        `encoding`, `skip_nulls`, `options` and `max_shard_bytes` are for
        bags only. If the write fails, no shard of it is left.
      durable: fsync every file before the rename that publishes it and the
        folders after the last (as `Writer.Options(durable=True)`, which
        `options` may also give): a return survives power loss.
      overwrite: replace another shard set of the same name with another
        count (`out@2.bagz` where `out@3.bagz` exists): the new set is
        published, then the old one's shards, `limits.` files, schema file
        (and manifest on a bucket) are deleted. Without it that set is
        refused with FileExistsError before anything is written, as
        `sackli.ShardedWriter` does. A set of the same count is replaced
        either way.

    Returns:
      The paths of the shards written, in order (shard folders for a dataset).

    Raises:
      TypeError: `data` is not a table-like object.
      ValueError: a malformed spec or argument (a shard count outside 1 to
        99,999: `out@0.bagz`), a null in `column`; for a
        dataset, a null value, a column whose Arrow type maps to no field
        type, or a spec naming a column the table lacks.
      FileNotFoundError: a Parquet path or the output folder is missing.
      FileExistsError: another shard set of the name exists (see `overwrite`).

    Example:
      >>> sackli.arrow.write_table("events.parquet", "events@8.bagz")
    """
    if spec is not None:
        bag_only = {"column": column, "encoding": encoding, "skip_nulls": skip_nulls,
                    "options": options, "max_shard_bytes": max_shard_bytes,
                    "overwrite": overwrite}
        given = [name for name, value in bag_only.items()
                 if value not in (None, False, "auto")]
        if given:
            raise ValueError(f"{', '.join(given)}: for bags, not for a dataset (spec= given)")
        if durable:
            dataset_options["durable"] = True
        return write_dataset_table(data, file_spec, spec, **dataset_options)
    if dataset_options:
        raise TypeError(f"{', '.join(dataset_options)}: for datasets only (give spec=)")
    target = path_argument(file_spec, "file_spec")
    check_shard_count(strip_local_prefix(target))  # `x@0.bagz` would be a literal name
    _check_bag_name(target)
    stream = open_table_stream(data)
    if column is None and encoding == "auto":
        if holds_raw_records(stream.schema):
            column, encoding = RECORD_COLUMN, None
        else:
            encoding = default_encoding(stream.schema)
    encoder = make_encoder(stream.schema, column, encoding, skip_nulls)
    rows = column is None and encoding in (ROW_ENCODING, "arrow", "json")
    # The set's one dictionary per dictionary column, from every piece.
    unifier = DictionaryUnifier(stream.schema if rows else pa.schema([]))
    # Nulls left out make the number of records unknown until the end.
    num_records = None if column is not None and skip_nulls else stream.num_rows
    # (rows, records) of each piece, encoded as the loop below asks for it.
    encoded = ((piece.num_rows, encoder.encode(unifier.observe(piece)))
               for piece in _pieces(stream.batches))
    first = next(encoded, None)
    if column is None and encoding == ROW_ENCODING:
        # Row-encoded records: the first rows decide how zstd stores literals.
        options = with_chosen_literals(options, has_zstd_suffix(_file_name(target)),
                                       None if first is None else first[1])
    options = options or WriterOptions()
    if durable and not options.durable:
        options = dataclasses.replace(options, durable=True)
    sink = ShardedWriter(target, options, max_shard_bytes=max_shard_bytes,
                         num_records=num_records, overwrite=overwrite)
    try:
        if rows:
            # Rows cannot be decoded without their schema: it is written
            # before any shard appears (and put back if the write fails),
            # and kept in the set's journal for `sackli.recover`.
            message = schema_message(stream.schema, str(encoding))
            sink._write_first("arrow_schema", message)
        with _progress_bar(stream.num_rows, progress) as bar, \
                concurrent.futures.ThreadPoolExecutor(1, "sackli-write-table") as writing:
            # One piece is written (on another thread; the engine releases
            # the GIL) while the next is encoded here.
            in_flight: concurrent.futures.Future[None] | None = None
            for rows, packed in itertools.chain([first] if first is not None else [], encoded):
                if in_flight is not None:
                    in_flight.result()
                in_flight = writing.submit(sink.write_packed, *packed)
                bar.update(rows)
            if in_flight is not None:
                in_flight.result()
        if unifier:
            # Every row seen: the schema file gets the set's dictionaries.
            sink._write_first("arrow_schema", schema_message(
                stream.schema, str(encoding), unifier.dictionaries()))
        paths = sink.close()
    except BaseException:
        sink.abort()
        raise
    return paths
