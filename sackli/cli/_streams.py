"""`-` on the command line: standard input and standard output.

- A bag on standard input (`sackli cat -`, also head, get and count, and
  `sackli convert - DST --from bag`) is copied to a temporary file first: a
  bag is read from its end (the limits) and by random access, which a pipe
  cannot give. It is read as `.bagz` when its records are zstd frames.
- TFRecord, JSON Lines and text on standard input (`sackli convert - DST
  --from FORMAT`) are copied to a temporary file too (JSON Lines is read
  twice: once to tell strings from other values), then converted as that
  file, with a progress bar that has a total.
- `sackli convert SRC - --to FORMAT` streams TFRecord, JSON Lines or text to
  standard output as the records are read (a bag or Parquet file needs a
  named file: it is written under a temporary name and renamed).

Messages call standard input `- (standard input)`, never the temporary file.
The temporary folder is removed when the process exits.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import tempfile
from typing import Any, Callable, Iterator

import sackli

from ._endpoints import BAG, Source, format_of, open_writer
from ._errors import UsageError
from ._progress import byte_progress, progress

__all__ = ["STDIO", "convert_progress", "destination_format", "open_stdin_bag", "source_name",
           "standard_streams", "write_standard_output"]

STDIO = "-"
STDIN_NAME = "- (standard input)"
STDOUT_NAME = "- (standard output)"
# The spool's name ends as the format's files do, so that the format (and a
# bag's compression) follows it as for any file.
_SPOOL_SUFFIXES = {"bag": ".bag", "tfrecord": ".tfrecord", "jsonl": ".jsonl", "text": ".txt"}
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# How many records tell a .bagz from a .bag (every non-empty one a zstd frame).
_SNIFFED_RECORDS = 16
_COPY_BYTES = 1 << 20

# The temporary folder of the spooled standard input, and the file in it
# (once per process: standard input can be read only once).
_spool: dict[str, Any] = {}


def _copy_standard_input(path: str) -> None:
    """Copies all of standard input to `path`, with a bar of the bytes read
    (a total when standard input is a regular file)."""
    source = sys.stdin.buffer
    copied = 0
    info = os.fstat(source.fileno())
    total = info.st_size - source.tell() if stat.S_ISREG(info.st_mode) else None
    with open(path, "wb") as spool, byte_progress(total, "reading standard input",
                                                  lambda: copied):
        while chunk := source.read1(_COPY_BYTES):
            spool.write(chunk)
            copied += len(chunk)


def _holds_zstd_frames(path: str) -> bool:
    """Whether the bag at `path` has records and every one of its first
    non-empty records is a zstd frame (then it is read as `.bagz`)."""
    with sackli.Reader(path, compression=sackli.CompressionNone()) as raw:
        sample = [record for record in raw[:_SNIFFED_RECORDS] if record]
    return bool(sample) and all(record.startswith(_ZSTD_MAGIC) for record in sample)


def spool_standard_input(kind: str) -> str:
    """The path of a temporary copy of standard input holding `kind` (see
    the module docstring); the same file on every call."""
    if "path" in _spool:
        return _spool["path"]
    folder = tempfile.TemporaryDirectory(prefix="sackli-stdin-")  # removed at exit
    path = os.path.join(folder.name, "stdin" + _SPOOL_SUFFIXES[kind])
    _copy_standard_input(path)
    if kind == BAG:
        with _naming_standard_input(path):
            if _holds_zstd_frames(path):
                os.rename(path, path + "z")
                path += "z"
    _spool.update(folder=folder, path=path)
    return path


def _renamed(error: BaseException, path: str) -> BaseException | None:
    """`error` with `path` called `- (standard input)`; None when it does
    not name `path` or cannot be rebuilt."""
    if isinstance(error, OSError):
        if path not in str(error.filename) and path not in str(error.strerror):
            return None
        renamed = OSError(error.errno, str(error.strerror).replace(path, STDIN_NAME))
        renamed.filename = STDIN_NAME if error.filename is not None else None
        return renamed
    if isinstance(error, ValueError) and path in str(error):  # CorruptionError too
        try:
            return type(error)(str(error).replace(path, STDIN_NAME))
        except TypeError:
            return None
    return None


@contextlib.contextmanager
def _naming_standard_input(path: str) -> Iterator[None]:
    """Errors raised inside call the spool `path` `- (standard input)`."""
    try:
        yield
    except (OSError, ValueError) as error:
        renamed = _renamed(error, path)
        if renamed is None:
            raise
        raise renamed from None


def open_stdin_bag(options: dict[str, Any]) -> sackli.Reader:
    """The bag on standard input, opened with the reader `options` (the
    `open_reader` of `-`)."""
    if str(options.get("limits_placement", "TAIL")).rpartition(".")[2] != "TAIL":
        raise UsageError(f"{STDIN_NAME} is one file: its limits must be at its end "
                         "(--limits-placement TAIL)")
    path = spool_standard_input(BAG)
    with _naming_standard_input(path):
        return sackli.Reader(path, **options)


def _check_format_flags(args: argparse.Namespace) -> None:
    """`-` needs its format given; a named file has its format in its name."""
    if args.src == STDIO and args.source_format is None:
        raise UsageError(f"reading {STDIN_NAME} needs --from FORMAT (bag, tfrecord, jsonl or text)")
    if args.src != STDIO and args.source_format is not None:
        raise UsageError(f"--from applies to {STDIN_NAME} only: a file's format follows its name")
    if args.dst == STDIO and args.output_format is None:
        raise UsageError(f"writing {STDOUT_NAME} needs --to FORMAT (tfrecord, jsonl or text)")
    if args.dst != STDIO and args.output_format is not None:
        raise UsageError(f"--to applies to {STDOUT_NAME} only: a file's format follows its name")


@contextlib.contextmanager
def standard_streams(args: argparse.Namespace) -> Iterator[None]:
    """Around `convert`: checks --from / --to, and for a source `-` copies
    standard input to a temporary file that `args.src` then names (errors
    call it `- (standard input)`)."""
    _check_format_flags(args)
    if args.src != STDIO:
        yield
        return
    path = spool_standard_input(args.source_format)
    args.src = path
    try:
        with _naming_standard_input(path):
            yield
    finally:
        args.src = STDIO


def source_name(args: argparse.Namespace) -> str:
    """What the summary calls the source: `-` for standard input."""
    return STDIO if args.src == _spool.get("path") else args.src


def destination_format(args: argparse.Namespace) -> str:
    """The format of DST: --to for `-`, else from its name."""
    return args.output_format if args.dst == STDIO else format_of(args.dst)


def convert_progress(source: Source, total: int | None) -> Any:
    """convert's bar: records when their number is known (bags), else the
    bytes of the source files read so far, out of their size."""
    if total is not None or source.kind == BAG:
        return progress(total, "convert")
    return byte_progress(source.bytes.total(source.paths()), "convert", lambda: source.bytes.read)


class _StandardOutput:
    """Standard output as a writer's file: closing it only flushes (the
    interpreter closes it, and the broken-pipe handling needs it open)."""

    name = STDOUT_NAME

    def write(self, data: bytes) -> int:
        return sys.stdout.buffer.write(data)

    def close(self) -> None:
        sys.stdout.buffer.flush()


def write_standard_output(source: Source, kind: str, args: argparse.Namespace,
                          batches: Callable[[Any], Iterator[list[bytes]]],
                          json_texts: bool) -> int:
    """Streams the records of `batches(on_skip)` to standard output in
    `kind` (tfrecord, jsonl, text); returns the exit status (1 when
    --skip-corrupt skipped any record)."""
    total = source.count() if source.kind == BAG else None
    skipped = 0

    def on_skip(item: sackli.SkippedRecord) -> None:
        nonlocal skipped
        skipped += 1
        bar.clear()
        print(f"sackli: skipped index {item.index}: {item.error}", file=sys.stderr, flush=True)

    writer = open_writer(kind, _StandardOutput(), args, name=STDOUT_NAME, json_texts=json_texts)
    with convert_progress(source, total) as bar:
        try:
            for batch in batches(on_skip if args.skip_corrupt else None):
                writer.write_many(batch)
                bar.update(len(batch))
        finally:
            writer.close()
    if skipped:
        print(f"sackli: skipped {skipped} corrupt record(s) of {total}", file=sys.stderr)
        return 1
    return 0

