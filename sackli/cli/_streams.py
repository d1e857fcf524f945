"""`-` on the command line: standard input and standard output.

- A bag on standard input (`sackli cat -`, also head, get and count, and
  `sackli convert - DST --from bag`) is copied to a temporary file first
  (see _stdin).
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
import sys
from typing import Any, Callable, Iterator

import sackli

from ._endpoints import BAG, Source, format_of, open_writer
from ._errors import UsageError
from ._escapes import escape_name
from ._progress import byte_progress, progress
from ._stdin import STDIN_NAME, STDIO, naming_standard_input, spool_standard_input, spooled_path

__all__ = ["STDIO", "convert_progress", "destination_format", "source_name",
           "standard_streams", "write_standard_output"]

STDOUT_NAME = "- (standard output)"


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
        with naming_standard_input(path):
            yield
    finally:
        args.src = STDIO


def source_name(args: argparse.Namespace) -> str:
    """What the summary calls the source: `-` for standard input."""
    return STDIO if args.src == spooled_path() else args.src


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
        print(f"sackli: skipped index {item.index}: {escape_name(item.error)}", file=sys.stderr, flush=True)

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

