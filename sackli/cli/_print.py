"""`sackli head`, `cat` and `get`: print records in a chosen format."""

from __future__ import annotations

import argparse
import sys
from typing import BinaryIO, Callable, Iterable

import sackli

from ..formats.lines import record_to_json
from ._reading import batch_records, iter_batches, open_reader

FORMAT_HELP = (
    "how records are printed: text (default; UTF-8 with invalid bytes as \\xNN and "
    "newlines as \\n, one record per line), raw (the bytes as they are, nothing between "
    "records; for pipes), hex (one record per line), json (one JSON string per line; a "
    'record that is not UTF-8 is printed as {"base64": "..."})'
)


def _text(record: bytes) -> bytes:
    text = record.decode("utf-8", "backslashreplace")
    return text.replace("\n", "\\n").replace("\r", "\\r").encode("utf-8") + b"\n"


def _json(record: bytes) -> bytes:
    return record_to_json(record).encode("utf-8") + b"\n"


FORMATTERS: dict[str, Callable[[bytes], bytes]] = {
    "text": _text,
    "raw": bytes,
    "hex": lambda record: record.hex().encode("ascii") + b"\n",
    "json": _json,
}


def add_format_argument(parser: argparse.ArgumentParser) -> None:
    """The --format option of the printing subcommands."""
    parser.add_argument("--format", choices=list(FORMATTERS), default="text", help=FORMAT_HELP)


def write_records(batches: Iterable[list[bytes]], format_name: str, out: BinaryIO | None = None) -> None:
    """Writes batches of records to `out` (stdout) in the named format."""
    out = out or sys.stdout.buffer
    formatter = FORMATTERS[format_name]
    for batch in batches:
        out.write(b"".join(map(formatter, batch)))
    out.flush()


def parse_range(text: str) -> slice:
    """`A:B` (either may be omitted, negatives count from the end) as a slice."""
    start, colon, stop = text.partition(":")
    if not colon:
        raise ValueError(f"--range {text!r} is not A:B (e.g. 10:20, :5 or -3:)")
    try:
        return slice(int(start) if start else None, int(stop) if stop else None)
    except ValueError:
        raise ValueError(f"--range {text!r}: A and B must be integers") from None


def parse_indices(text: str) -> list[int]:
    """`I,J,...` as a list of ints."""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--indices {text!r} is not a comma-separated list of integers") from None


def _index_batches(reader: sackli.Reader, indices: list[int]) -> Iterable[list[bytes]]:
    step = batch_records(reader)
    for start in range(0, len(indices), step):
        yield reader.read_indices(indices[start : start + step])


def head(args: argparse.Namespace) -> int:
    """Prints the first N records."""
    if args.n < 0:
        raise ValueError(f"-n must be >= 0, not {args.n}")
    reader = open_reader(args.spec, args)
    write_records(iter_batches(reader[: args.n]), args.format)
    return 0


def cat(args: argparse.Namespace) -> int:
    """Prints all records, a range, or chosen indices."""
    reader = open_reader(args.spec, args)
    if args.indices is not None:
        batches = _index_batches(reader, parse_indices(args.indices))
    else:
        selection = parse_range(args.range) if args.range is not None else slice(None)
        batches = iter_batches(reader[selection])
    write_records(batches, args.format)
    return 0


def get(args: argparse.Namespace) -> int:
    """Prints the record at one index."""
    reader = open_reader(args.spec, args)
    write_records([[reader[args.index]]], args.format)
    return 0
