"""`sackli convert`: stream records from one format or sharding to another.

Destinations: a single file; `name@N.ext`, N shards holding contiguous runs
of records as even as possible (a source of unknown length, e.g. JSON Lines,
is read once into a hidden spool and split evenly at the end); or
`name@*.ext` with --max-shard-bytes, as many shards as needed, named
`name-0000i-of-0000N.ext` once N is known. The shards are planned and
published by the library's shard-set writer (`sackli._shard_set`); each
output file is written under a hidden temporary name and renamed at the end,
all together: a set appears at once or not at all. Memory stays bounded:
records move in batches from reader to writer.

An existing destination is refused unless --force is given, and so is
another shard set of the destination's name with another count (it would
make `name@*` ambiguous); with --force that set is deleted once the new one
is published (`sackli._set_conflicts`).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Iterator

import sackli

from .. import _bulk
from .._bulk import stored_bytes
from .._sets import (
    OpenShard, ShardSetWriter, bag_shard_opener, check_shard_count, refuse_glob, refuse_other_sets,
    split_shard_entry,
)
from .._storage import WriteDestination, delete_objects, write_destination
from ._endpoints import (
    BAG, JSON_LINES, PARQUET, RECORD_OVERHEAD, Source, bag_writer_options, check_output_options,
    files_of, format_of, open_writer, refuse_existing,
)
from ._errors import UsageError
from ._escapes import escape_name
from ._full_disk import naming_target
from ._json_records import finish_bag_set, records_are_json_texts, row_json_printer, rows_as_json
from ._parquet import convert_parquet
from ._samples import convert_samples, sample_source
from ._streams import (
    STDIO, convert_progress, destination_format, source_name, standard_streams, write_standard_output,
)

# How the command line replaces another shard set of the destination's name.
_FORCE_ADVICE = "pass --force to replace it"


def _temp_name(path: str) -> str:
    """Where `convert` writes `path` until the whole output is done: a hidden
    name in the same folder, with the same ending (so formats and compression
    follow it), that no glob of the output's shards matches."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".sackli-convert-{os.getpid()}-{name}")


class _TempNamedShard:
    """One output file of `convert` (any format), written under `_temp_name`
    until `publish` renames it: the per-shard file of the shard-set writer."""

    def __init__(self, kind: str, path: str, args: argparse.Namespace,
                 json_texts: bool = False) -> None:
        self._kind = kind
        self._temp = _temp_name(path)
        self._writer = open_writer(kind, self._temp, args, name=path, json_texts=json_texts)
        self._finished = False  # closed without error

    @property
    def records_written(self) -> int:
        return self._writer.records_written

    def stored_bytes(self) -> int:
        written = self._writer.bytes_written  # other formats count their framing
        return stored_bytes(written, self.records_written) if self._kind == BAG else written

    def write_many(self, records: list[Any]) -> None:
        self._writer.write_many(records)

    def write_packed(self, data: Any, offsets: memoryview) -> None:
        if self._kind == BAG:
            _bulk.write_packed(self._writer, data, offsets)
            return
        view = memoryview(data)
        self._writer.write_many(view[offsets[k]:offsets[k + 1]] for k in range(len(offsets) - 1))

    def finish(self) -> None:
        self._writer.close()
        self._finished = True

    def publish(self, target: str) -> list[str]:
        """Renames the file onto `target`; a bag's limits file goes with
        it, and a stale one beside a TAIL bag goes away."""
        published = []
        for temp_file, final_file in zip(files_of(self._kind, self._temp), files_of(self._kind, target)):
            if os.path.exists(temp_file):
                os.replace(temp_file, final_file)
                published.append(final_file)
            elif final_file != target:
                delete_objects([final_file])
        return published

    def targets(self, target: str) -> list[str]:
        return files_of(self._kind, target)

    def discard(self) -> None:
        try:
            # A bag whose close failed (a full disk) is closed but keeps its
            # hidden partial folder until discarded.
            if self._kind == BAG and not self._finished:
                _bulk.discard(self._writer)
            else:
                self._writer.close()
        finally:
            delete_objects(files_of(self._kind, self._temp))


def _shard_opener(kind: str, args: argparse.Namespace, sharded: bool,
                  destination: WriteDestination, json_texts: bool = False) -> OpenShard:
    """How the destination opens each output file: where a file grows in
    place (locally), under a `_temp_name`; on gs:// / s3:// (bags only) as
    `sackli.ShardedWriter` does, streaming into hidden objects copied into
    place at the end."""
    if destination.grows_in_place:
        return lambda path: _TempNamedShard(kind, path, args, json_texts)
    if kind != BAG:
        raise UsageError(f"{args.dst}: convert writes bags and Parquet to gs:// and s3://; "
                         "write other formats to a local path")
    return bag_shard_opener(args.dst, sackli.Writer.Options(**bag_writer_options(args.dst, args)),
                            sharded, destination)


def _check_distinct(source: Source, outputs: list[str]) -> None:
    sources = {os.path.realpath(path) for path in source.paths()}
    for path in outputs:
        if os.path.realpath(path) in sources:
            raise UsageError(f"{path} is both source and destination; write elsewhere")


def convert(args: argparse.Namespace) -> int:
    """Converts SRC to DST; prints what it wrote. A write without room
    names DST, not a hidden file of it."""
    # Outside naming_target: a full disk while spooling standard input is
    # not the destination's.
    with standard_streams(args), naming_target(args.dst):
        return _convert(args)


def _batches(source: Source, printer: Any, on_skip: Any) -> Iterator[list[bytes]]:
    """The source's records, as JSON objects when `printer` decodes rows."""
    batches = source.batches(on_skip)
    return batches if printer is None else rows_as_json(batches, printer, source.spec)


def _convert(args: argparse.Namespace) -> int:
    """`convert` within its error handling and standard streams."""
    if "," in args.dst:
        raise UsageError(f"{args.dst}: the destination must be one path or one shard spec")
    try:
        check_shard_count(args.dst)
        refuse_glob(args.dst, args.dst)  # a writer needs a name, not a pattern
    except ValueError as error:
        raise UsageError(str(error)) from None
    samples = sample_source(args.src) if args.src != STDIO else None
    if samples is not None:  # an image folder or WebDataset tars: rows out
        return convert_samples(samples, args, _FORCE_ADVICE)
    source_kind, kind = format_of(args.src), destination_format(args)
    check_output_options(kind, args.dst, args)
    if args.skip_corrupt and (source_kind != BAG or kind == PARQUET):
        raise UsageError("--skip-corrupt applies to bag sources (and not to Parquet conversions)")
    if PARQUET in (source_kind, kind):
        if not args.force:
            refuse_existing(kind, args.dst)
            refuse_other_sets(args.dst, None, _FORCE_ADVICE)
        return convert_parquet(source_kind, kind, args)
    exports_rows = source_kind == BAG and kind == JSON_LINES  # --decode applies
    if (args.column is not None or args.skip_nulls or args.encoding != "auto"
            or (args.decode != "auto" and not exports_rows)):
        raise UsageError("--column, --skip-nulls, --encoding and --decode apply to Parquet "
                         "conversions only (and --decode to bag -> JSON Lines)")
    source = Source(args.src, source_kind, args)
    source.json_texts = records_are_json_texts(source)
    printer = row_json_printer(args.src, args) if exports_rows else None
    if args.dst == STDIO:  # streamed: no shards, nothing to publish
        return write_standard_output(source, kind, args,
                                     lambda on_skip: _batches(source, printer, on_skip),
                                     source.json_texts or printer is not None)
    sharded = split_shard_entry(args.dst)
    by_size = sharded is not None and sharded[1] == "*"
    if by_size != (args.max_shard_bytes is not None):
        raise UsageError("use --max-shard-bytes with a name@*.ext destination, and only then")
    if by_size and args.max_shard_bytes <= 0:
        raise UsageError(f"--max-shard-bytes must be > 0, not {args.max_shard_bytes}")
    if not args.force:  # here, not in ShardSetWriter: the advice is a flag
        refuse_other_sets(args.dst, None, _FORCE_ADVICE)

    # A bag knows its length; other sources are read once, and a name@N.ext
    # destination then splits them from a spool at the end (so does a bag
    # read with --skip-corrupt: how many records survive is not known).
    total = source.count() if source_kind == BAG else None
    destination = write_destination(args.dst)  # decided once, where the path enters
    shards = ShardSetWriter(
        args.dst, sharded,
        _shard_opener(kind, args, sharded is not None, destination,
                      source.json_texts or printer is not None),
        record_overhead=RECORD_OVERHEAD[kind], max_shard_bytes=args.max_shard_bytes,
        num_records=None if by_size or args.skip_corrupt else total, overwrite=args.force,
        destination=destination)
    _check_distinct(source, shards.paths)
    if not args.force:
        refuse_existing(kind, args.dst)

    skipped = 0

    def on_skip(item: sackli.SkippedRecord) -> None:
        nonlocal skipped
        skipped += 1
        bar.update(1)
        bar.clear()
        print(f"sackli: skipped index {item.index}: {escape_name(item.error)}", file=sys.stderr, flush=True)

    with convert_progress(source, total) as bar:
        try:
            for batch in _batches(source, printer, on_skip if args.skip_corrupt else None):
                shards.write_bytes(batch)  # every source gives lists of bytes
                bar.update(len(batch))
            paths = shards.close()
        except BaseException:
            shards.abort()
            raise
    if kind == BAG:  # what the records are follows them
        finish_bag_set(paths, source)
    shown = paths[0] if len(paths) == 1 else f"{len(paths)} shards, {paths[0]} ... {paths[-1]}"
    print(f"converted {shards.records_written} records from {escape_name(source_name(args))} "
          f"to {escape_name(shown)}")
    if skipped:
        print(f"sackli: skipped {skipped} corrupt record(s) of {total}", file=sys.stderr)
        return 1
    return 0
