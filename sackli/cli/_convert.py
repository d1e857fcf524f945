"""`sackli convert`: stream records from one format or sharding to another.

Destinations: a single file; `name@N.ext`, N shards holding contiguous runs
of records as even as possible; or `name@*.ext` with --max-shard-bytes, as
many shards as needed, named `name-0000i-of-0000N.ext` once N is known.
Every output file is written under a hidden temporary name and renamed at
the end, all together: a set appears at once or not at all. Memory stays
bounded: records move in batches from reader to writer.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Iterator

from .._format import stored_bytes
from .._shard_spec import split_shard_entry, shard_name
from .._shard_writer import even_split
from ._endpoints import (
    BAG, PARQUET, RECORD_OVERHEAD, Source, check_output_options, files_of, format_of,
    open_writer, refuse_existing, remove_other_shard_sets, remove_quietly,
)
from ._parquet import convert_parquet
from ._progress import progress


class _RecordStream:
    """Batches of records, taken out in pieces of any size."""

    def __init__(self, batches: Iterator[list[bytes]]) -> None:
        self._batches = batches
        self._pending: list[bytes] = []
        self._offset = 0

    def _fill(self) -> bool:
        while self._offset >= len(self._pending):
            batch = next(self._batches, None)
            if batch is None:
                return False
            self._pending, self._offset = batch, 0
        return True

    def exhausted(self) -> bool:
        """Whether every record has been taken."""
        return not self._fill()

    def take(self, max_records: int | None = None) -> list[bytes]:
        """Up to `max_records` records (no more than one batch); [] at the end."""
        if not self._fill():
            return []
        end = len(self._pending) if max_records is None else min(
            len(self._pending), self._offset + max_records)
        taken = self._pending[self._offset:end]
        self._offset = end
        return taken

    def take_within(self, budget: int, overhead: int, at_least_one: bool) -> list[bytes]:
        """Records whose sizes plus `overhead` each add up to at most `budget`
        (one record in any case when `at_least_one`)."""
        if not self._fill():
            return []
        end = self._offset
        while end < len(self._pending):
            cost = len(self._pending[end]) + overhead
            if cost > budget and not (at_least_one and end == self._offset):
                break
            budget -= cost
            end += 1
        taken = self._pending[self._offset:end]
        self._offset = end
        return taken


def _temp_name(path: str) -> str:
    """Where `convert` writes `path` until the whole output is done: a hidden
    name in the same folder, with the same ending (so formats and compression
    follow it), that no glob of the output's shards matches."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".sackli-convert-{os.getpid()}-{name}")


class _Conversion:
    """One run of `convert`: the stream, the writers and the files written,
    under temporary names until `publish` renames them all (deleted again if
    the run fails)."""

    def __init__(self, source: Source, kind: str, args: argparse.Namespace, progress: Any) -> None:
        self.kind = kind
        self.args = args
        self.progress = progress
        self.stream = _RecordStream(source.batches())
        self.created: list[str] = []  # every temporary file
        self.written: list[str] = []  # the temporary name of each output, in order
        self.records = 0

    def _open(self, path: str) -> Any:
        temp = _temp_name(path)
        self.created.extend(files_of(self.kind, temp))
        self.written.append(temp)
        return open_writer(self.kind, temp, self.args, name=path)

    def publish(self, paths: list[str]) -> None:
        """Renames the outputs onto `paths`, one after the other once all are
        complete: the set appears at once. A bag's limits file goes with it;
        a stale one beside a TAIL bag goes away."""
        for temp, final in zip(self.written, paths):
            for temp_file, final_file in zip(files_of(self.kind, temp), files_of(self.kind, final)):
                if os.path.exists(temp_file):
                    os.replace(temp_file, final_file)
                elif final_file != final:
                    remove_quietly([final_file])

    def _write(self, writer: Any, records: list[bytes]) -> None:
        writer.write_many(records)
        self.records += len(records)
        self.progress.update(len(records))

    def write_counted(self, paths: list[str], counts: list[int | None]) -> None:
        """Writes `counts[i]` records (None: all that remain) to `paths[i]`."""
        for path, count in zip(paths, counts):
            writer = self._open(path)
            try:
                remaining = count
                while remaining is None or remaining > 0:
                    records = self.stream.take(remaining)
                    if not records:
                        break
                    self._write(writer, records)
                    remaining = None if remaining is None else remaining - len(records)
            finally:
                writer.close()

    def write_by_size(self, base: str, suffix: str, max_bytes: int) -> int:
        """Writes shards of at most about `max_bytes` each (to be named
        `base-0000i-of-0000N.suffix` once N is known); returns N."""
        overhead = RECORD_OVERHEAD[self.kind]
        shards = 0
        more = True  # at least one shard, even for an empty source
        while more:
            writer = self._open(f"{base}-{shards:05d}-of-pending{suffix}")
            shards += 1
            try:
                while True:
                    used = (stored_bytes(writer.bytes_written, writer.records_written) if self.kind == BAG
                            else writer.bytes_written)
                    records = self.stream.take_within(
                        max_bytes - used, overhead, at_least_one=writer.records_written == 0)
                    if not records:
                        break
                    self._write(writer, records)
            finally:
                writer.close()
            more = not self.stream.exhausted()
        return shards


def _check_distinct(source: Source, outputs: list[str]) -> None:
    sources = {os.path.realpath(path) for path in source.paths()}
    for path in outputs:
        if os.path.realpath(path) in sources:
            raise ValueError(f"{path} is both source and destination; write elsewhere")


def _write_by_size(run: _Conversion, base: str, suffix: str, max_bytes: int) -> list[str]:
    """Writes `base@*suffix` shards of about `max_bytes`; returns their paths."""
    shards = run.write_by_size(base, suffix, max_bytes)
    return [shard_name(base, i, shards, suffix) for i in range(shards)]


def convert(args: argparse.Namespace) -> int:
    """Converts SRC to DST; prints what it wrote."""
    if "," in args.dst:
        raise ValueError(f"{args.dst}: the destination must be one path or one shard spec")
    source_kind, kind = format_of(args.src), format_of(args.dst)
    check_output_options(kind, args.dst, args)
    if PARQUET in (source_kind, kind):
        if not args.force:
            refuse_existing(kind, args.dst)
        return convert_parquet(source_kind, kind, args)
    if args.column is not None or args.skip_nulls or args.encoding != "arrow" or args.decode != "auto":
        raise ValueError("--column, --skip-nulls, --encoding and --decode apply to Parquet "
                         "conversions only")
    source = Source(args.src, source_kind, args)
    sharded = split_shard_entry(args.dst)
    by_size = sharded is not None and sharded[1] == "*"
    if by_size != (args.max_shard_bytes is not None):
        raise ValueError("use --max-shard-bytes with a name@*.ext destination, and only then")
    if by_size and args.max_shard_bytes <= 0:
        raise ValueError(f"--max-shard-bytes must be > 0, not {args.max_shard_bytes}")

    paths: list[str] = [args.dst]
    counts: list[int | None] = [None]
    if sharded is not None and not by_size:
        base, count, suffix = sharded
        paths = [shard_name(base, i, int(count), suffix) for i in range(int(count))]
        counts = list(even_split(source.count(), int(count)))
    _check_distinct(source, [] if by_size else paths)
    if not args.force:
        refuse_existing(kind, args.dst)

    if source_kind == BAG:
        total: int | None = source.count()  # a bag knows its length
    else:
        total = None if None in counts or by_size else sum(c for c in counts if c is not None)
    with progress(total, "convert") as bar:
        run = _Conversion(source, kind, args, bar)
        try:
            if by_size:
                assert sharded is not None
                paths = _write_by_size(run, sharded[0], sharded[2], args.max_shard_bytes)
            else:
                run.write_counted(paths, counts)
            run.publish(paths)
        except BaseException:
            remove_quietly(run.created)
            raise
    if args.force:
        remove_other_shard_sets(kind, args.dst, paths)
    shown = paths[0] if len(paths) == 1 else f"{len(paths)} shards, {paths[0]} ... {paths[-1]}"
    print(f"converted {run.records} records from {args.src} to {shown}")
    return 0
