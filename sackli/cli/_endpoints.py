"""The ends of `sackli convert`: which format a name stands for, reading a
source as batches of records, and opening a writer for one output file."""

from __future__ import annotations

import argparse
import dataclasses
import errno
import functools
from typing import Any, Callable, Iterator

import sackli

from .. import formats
from .._bulk import LIMIT_BYTES, batched
from .._sets import (
    existing_shard_sets, expand_file_spec, files_of as bag_files_of, has_zstd_suffix, shard_name,
    split_shard_entry,
)
from .._storage import object_exists
from ._errors import UsageError
from ._progress import ByteCount
from ._reading import iter_batches, open_reader, read_file

BAG, TFRECORD, JSON_LINES, TEXT, PARQUET = "bag", "tfrecord", "jsonl", "text", "parquet"

_SUFFIXES = {
    ".bagz": BAG, ".bag": BAG,
    ".tfrecord": TFRECORD, ".tfrecords": TFRECORD,
    ".tfrecord.gz": TFRECORD, ".tfrecords.gz": TFRECORD,
    ".jsonl": JSON_LINES, ".ndjson": JSON_LINES, ".jsonl.gz": JSON_LINES,
    ".txt": TEXT, ".txt.gz": TEXT,
    ".parquet": PARQUET,
}
_SUFFIXES_LONGEST_FIRST = sorted(_SUFFIXES.items(), key=lambda item: -len(item[0]))
_BATCH_BYTES = 4 << 20
_DEFAULT_LEVEL = 3
_BATCH_RECORDS = 16384
# Bytes a record costs beyond its payload, by format (for --max-shard-bytes).
RECORD_OVERHEAD = {BAG: LIMIT_BYTES, TFRECORD: 16, JSON_LINES: 3, TEXT: 1}


def format_of(spec: str) -> str:
    """The format a file spec names, from the suffix of each entry.

    Raises ValueError when a suffix is unknown or entries disagree.
    """
    found = set()
    for entry in spec.split(","):
        kind = next((kind for suffix, kind in _SUFFIXES_LONGEST_FIRST if entry.endswith(suffix)),
                    None)
        if kind is None:
            known = ", ".join(sorted(_SUFFIXES))
            raise UsageError(f"{entry}: cannot tell the format from the name (known: {known})")
        found.add(kind)
    if len(found) > 1:
        raise UsageError(f"{spec}: entries of different formats ({', '.join(sorted(found))})")
    return found.pop()


_FILE_READERS: dict[str, Callable[[str], Iterator[bytes]]] = {
    TFRECORD: formats.read_tfrecords,
    JSON_LINES: formats.read_json_lines,
    TEXT: formats.read_text_lines,
}


@dataclasses.dataclass
class Source:
    """A source to convert: its format and how to stream its records."""

    spec: str
    kind: str
    args: argparse.Namespace
    # JSON Lines: each record is its line's JSON text (sackli/cli/_json_records.py).
    json_texts: bool = False
    # The bytes read so far of files other than bags, for the progress bar.
    bytes: ByteCount = dataclasses.field(default_factory=ByteCount)

    def batches(self, skip_corrupt: Any = None) -> Iterator[list[bytes]]:
        """All records, in bounded-memory batches, in spec order
        (`skip_corrupt`, for bags only: as for `Reader.read_range`)."""
        if self.kind == BAG:
            return iter_batches(open_reader(self.spec, self.args), skip_corrupt)
        read = _FILE_READERS[self.kind]
        if self.kind == JSON_LINES:
            read = functools.partial(formats.read_json_lines, base64=self.args.jsonl_base64,
                                     json_texts=self.json_texts)
        paths = expand_file_spec(self.spec)
        return batched(self.bytes.records(read, paths), _BATCH_RECORDS, _BATCH_BYTES)

    def count(self) -> int:
        """The number of records (for other formats than bags: one pass)."""
        if self.kind == BAG:
            return len(open_reader(self.spec, self.args))
        return sum(len(batch) for batch in self.batches())

    def paths(self) -> list[str]:
        """The files the source reads."""
        return expand_file_spec(self.spec)


def bag_writer_options(path: str, args: argparse.Namespace) -> dict[str, Any]:
    """Writer option overrides for a bag destination, from the output flags."""
    options: dict[str, Any] = {"limits_placement": args.output_limits_placement}
    if has_zstd_suffix(path):
        dictionary = read_file(args.dictionary) if args.dictionary else b""
        options["compression"] = sackli.CompressionZstd(level=_DEFAULT_LEVEL if args.level is None else args.level,
                                                dictionary=dictionary)
    else:
        options["compression"] = sackli.CompressionNone()
    return options


def check_output_options(kind: str, spec: str, args: argparse.Namespace) -> None:
    """Refuses output options that mean nothing for the destination."""
    compressed = kind == BAG and has_zstd_suffix(spec)
    if not compressed and (args.level is not None or args.dictionary):
        raise UsageError("--level and --output-dictionary apply to .bagz destinations only")
    if args.gzip_level is not None and not spec.endswith(".gz"):
        raise UsageError("--gzip-level applies to .gz destinations only")
    if args.jsonl_base64 and JSON_LINES not in (kind, format_of(args.src)):
        raise UsageError("--jsonl-base64 applies to JSON Lines sources and destinations only")
    if kind not in (BAG, PARQUET) and args.output_limits_placement != "TAIL":
        raise UsageError("--output-limits-placement applies to bag destinations only")


def open_writer(kind: str, path: str, args: argparse.Namespace, name: str | None = None,
                json_texts: bool = False) -> Any:
    """A writer (write_many, records_written, bytes_written, close) for one
    file; `name` is what errors call it (default: `path`); `json_texts`: a
    JSON Lines file gets records that are JSON texts, written as values."""
    if kind == BAG:
        return sackli.Writer(path, **bag_writer_options(path, args))
    level = formats.DEFAULT_GZIP_LEVEL if args.gzip_level is None else args.gzip_level
    if kind == JSON_LINES:
        return formats.JsonLinesWriter(path, gzip_level=level, name=name, base64=args.jsonl_base64,
                                       json_texts=json_texts)
    writer_type = {TFRECORD: formats.TFRecordWriter, TEXT: formats.TextLinesWriter}[kind]
    return writer_type(path, gzip_level=level, name=name)


def files_of(kind: str, path: str) -> list[str]:
    """The files a writer of `kind` creates for `path` (a bag may leave
    `limits.<name>` beside it)."""
    return bag_files_of(path) if kind == BAG else [path]


def _destination_files(kind: str, spec: str) -> list[str]:
    """The files of the destination `spec` that exist now (for name@*.ext:
    every shard of that name, whatever the count)."""
    sharded = split_shard_entry(spec)
    if sharded is None:
        paths = [spec]
    elif sharded[1] == "*":
        sets = existing_shard_sets(sharded[0], sharded[2]).values()
        paths = [path for shards in sets for path in shards]
    else:
        base, count, suffix = sharded
        paths = [shard_name(base, i, int(count), suffix) for i in range(int(count))]
    return [file for path in paths for file in files_of(kind, path) if object_exists(file)]


def refuse_existing(kind: str, spec: str) -> None:
    """Raises FileExistsError when writing `spec` would replace files."""
    existing = _destination_files(kind, spec)
    if existing == [spec]:
        raise FileExistsError(errno.EEXIST, f"{spec} exists; pass --force to overwrite it")
    if existing:
        what = existing[0] + (f" and {len(existing) - 1} more file(s)" if len(existing) > 1 else "")
        raise FileExistsError(
            errno.EEXIST, f"{spec}: {what} exist(s); pass --force to overwrite")
