"""`sackli convert` to and from Parquet, through the Arrow bridge.

Parquet -> bag: each row becomes a record (`--encoding row`, the default
where the schema allows it, else `arrow`; or `json`), or each value of one
binary/string column (`--column`).
Bag -> Parquet: rows written with `--encoding row`/`arrow`/`json` get their
columns back (the schema file beside the bag says which); other bags become
one binary column `record`. Both stream in bounded memory.
"""

from __future__ import annotations

import argparse
from typing import Any

import sackli

from .._storage import atomic_output
from ._endpoints import BAG, PARQUET, bag_writer_options
from ._errors import UsageError
from ._escapes import escape_name
from ._json_records import mark_bag_set
from ._progress import progress
from ._reading import open_reader


def _arrow() -> Any:
    try:
        import sackli.arrow
    except ImportError as error:
        raise ValueError(f"Parquet conversion needs pyarrow: pip install 'sackli-bagz[arrow]' "
                         f"({error})") from None
    return sackli.arrow


def _check_column(src: str, column: str) -> None:
    """Raises UsageError when `--column` names no column of the Parquet
    source, or one whose values cannot be records (as write_table would
    refuse it, before anything is written)."""
    from ..arrow._codecs import ColumnEncoder, parquet_dataset

    schema = parquet_dataset(src).schema
    try:
        ColumnEncoder(schema, column, skip_nulls=False)
    except KeyError:
        raise UsageError(f"--column {column}: {src} has no such column "
                         f"(columns: {', '.join(schema.names)})") from None
    except TypeError:
        value_type = schema.field(column).type
        raise UsageError(f"--column {column}: the column is {value_type}, and only a binary or "
                         "string column can be written as records; leave --column out to "
                         "write whole rows") from None


def _to_bag(args: argparse.Namespace) -> int:
    arrow = _arrow()
    if "," in args.src:
        raise UsageError(f"{args.src}: convert one Parquet file or folder at a time")
    if args.column is not None:
        _check_column(args.src, args.column)
    options = bag_writer_options(args.dst, args)
    if args.level is None and not args.dictionary:
        # No zstd flag: compression by suffix lets write_table choose how
        # zstd stores literals (docs/arrow.md), at the same level 3.
        del options["compression"]
    paths = arrow.write_table(
        args.src, args.dst, column=args.column, encoding=args.encoding,
        skip_nulls=args.skip_nulls, options=sackli.Writer.Options(**options),
        max_shard_bytes=args.max_shard_bytes, overwrite=args.force)
    mark_bag_set(paths, json_texts=False)  # rows or column values: a stale mark goes
    shown = paths[0] if len(paths) == 1 else f"{len(paths)} shards, {paths[0]} ... {paths[-1]}"
    print(f"converted {escape_name(args.src)} to {escape_name(shown)}")
    return 0


def _to_parquet(args: argparse.Namespace) -> int:
    arrow = _arrow()
    import pyarrow.parquet as pq

    reader = open_reader(args.src, args)
    batches = arrow.read_batches(reader, decode=args.decode)
    rows = 0
    # Atomic: a hidden local file renamed onto DST at the end, or for gs:// /
    # s3:// an upload that completes only then; nothing is left on failure.
    with atomic_output(args.dst) as output, \
            pq.ParquetWriter(output, batches.schema) as writer, \
            progress(len(reader), "convert", unit=" rows") as bar:
        for batch in batches:
            writer.write_batch(batch)
            rows += batch.num_rows
            bar.update(batch.num_rows)
    print(f"converted {rows} records from {escape_name(args.src)} to {escape_name(args.dst)}")
    return 0


def convert_parquet(source_kind: str, destination_kind: str, args: argparse.Namespace) -> int:
    """Converts between Parquet and bags (the other pairs are refused)."""
    if source_kind == PARQUET and destination_kind == BAG:
        return _to_bag(args)
    if source_kind == BAG and destination_kind == PARQUET:
        if args.column is not None or args.skip_nulls:
            raise UsageError("--column and --skip-nulls apply to Parquet sources")
        return _to_parquet(args)
    raise UsageError("Parquet converts to and from bags (.bag, .bagz) only")
