"""`sackli head`, `cat` and `get`: print records in a chosen format.

A corrupt record stops the output after every record before it has been
printed, with the error; `--skip-corrupt` reports it on stderr (its index and
the error) and goes on, says at the end how many were skipped, and exits
with status 1 if any was.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any, BinaryIO, Callable, Sequence

import sackli

from .._bulk import read_skipping
from ..formats.lines import json_text_line, record_to_json
from . import _dataset_print, _datasets
from ._arguments import any_case
from ._escapes import JSON_ESCAPES, escape_name, escape_text
from ._errors import BadArgument
from ._json_records import bag_holds_json_texts
from ._progress import progress
from ._reading import batch_records, open_reader
from ._rows import DECODE_CHOICES, DECODE_HELP, RowDecodeError, RowPrinter, row_printer

FORMAT_HELP = (
    "how records are printed: text (default; UTF-8 with invalid bytes as \\xNN, newlines as "
    "\\n and other control characters escaped, one record per line), raw (the bytes as they "
    "are, nothing between records; for pipes), hex (one record per line), json (one JSON "
    'string per line; a record that is not UTF-8 is printed as {"base64": "..."}). Rows '
    "(see --decode) print as a table (text) or one JSON object per line (json)"
)

def _text(record: bytes) -> bytes:
    return escape_text(record).encode("utf-8") + b"\n"


def _json(record: bytes) -> bytes:
    return record_to_json(record).translate(JSON_ESCAPES).encode("utf-8") + b"\n"


FORMATTERS: dict[str, Callable[[bytes], bytes]] = {
    "text": _text,
    "raw": bytes,
    "hex": lambda record: record.hex().encode("ascii") + b"\n",
    "json": _json,
}


def add_format_argument(parser: argparse.ArgumentParser) -> None:
    """The --format and --decode options of the printing subcommands (any
    case: --format JSON)."""
    parser.add_argument("--format", choices=list(FORMATTERS), type=any_case(list(FORMATTERS)),
                        default="text", help=FORMAT_HELP)
    parser.add_argument("--decode", choices=DECODE_CHOICES, type=any_case(DECODE_CHOICES),
                        default="auto", help=DECODE_HELP)


def add_skip_corrupt_argument(parser: argparse.ArgumentParser) -> None:
    """The --skip-corrupt option of `head`, `cat` and `convert`."""
    parser.add_argument(
        "--skip-corrupt", action="store_true",
        help="go on past records that do not decode: each is reported on stderr with its "
             "index and error, then how many were skipped; the exit status is 1 if any was")


def parse_range(text: str) -> slice:
    """`A:B` (either may be omitted, negatives count from the end) as a
    slice: the argparse `type` of --range."""
    start, colon, stop = text.partition(":")
    if not colon:
        raise argparse.ArgumentTypeError(f"{text!r} is not A:B (e.g. 10:20, :5 or -3:)")
    try:
        return slice(int(start) if start else None, int(stop) if stop else None)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: A and B must be integers") from None


def parse_indices(text: str) -> list[int]:
    """`I,J,...` as a list of ints: the argparse `type` of --indices."""
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers") from None


@dataclasses.dataclass
class _Selection:
    """Records to print: `count` positions, read by `fetch(start, count)`;
    `index(position)` is a position's index in the bag, for messages."""

    count: int
    fetch: Callable[[int, int], list[bytes]]
    index: Callable[[int], int]
    batch: int


def _range_selection(reader: sackli.Reader, selection: slice) -> _Selection:
    start, _, step = selection.indices(len(reader))
    view = reader[selection]
    return _Selection(len(view), view.read_range, lambda position: start + position * step,
                      batch_records(reader))


def _index_selection(reader: sackli.Reader, indices: Sequence[int]) -> _Selection:
    size = len(reader)
    for index in indices:  # all checked before anything is printed
        if not -size <= index < size:  # a wrong argument for this bag: exit 2
            raise BadArgument(f"index {index} out of range for a reader of {size} records")
    resolved = [index % size for index in indices]
    return _Selection(len(resolved), lambda start, count: reader.read_indices(resolved[start:start + count]),
                      resolved.__getitem__, batch_records(reader))


def record_formatter(reader: sackli.Reader, args: argparse.Namespace) -> Callable[[bytes], bytes]:
    """How args.format prints a record of `reader`: with json, the records
    of a bag marked as holding JSON texts (`sackli convert` from JSON Lines)
    print as the values they are, as the bag's JSON Lines export writes
    them (unless --decode raw)."""
    if args.format == "json" and args.decode != "raw" and bag_holds_json_texts(reader.paths[0]):
        return _json_value
    return FORMATTERS[args.format]


def _json_value(record: bytes) -> bytes:
    try:
        return json_text_line(record)
    except ValueError as error:
        raise sackli.CorruptionError(
            f"a record is not JSON text ({error}), though the bag is marked as holding JSON "
            "texts; print the records as JSON strings with --decode raw") from None


def _print_selection(selection: _Selection, args: argparse.Namespace,
                     rows: RowPrinter | None, formatter: Callable[[bytes], bytes]) -> int:
    """Prints the records with `formatter` (or, with `rows`, the rows they
    hold); returns the exit status."""
    out: BinaryIO = sys.stdout.buffer
    skipped = 0

    def report(index: int, error: Any) -> None:
        """A record that cannot be printed: an error, or with --skip-corrupt
        a line on stderr."""
        nonlocal skipped
        out.flush()
        if not args.skip_corrupt:
            raise sackli.CorruptionError(f"index {index}: {error} (--skip-corrupt goes on past it)")
        skipped += 1
        bar.clear()
        print(f"sackli: skipped index {index}: {escape_name(error)}", file=sys.stderr, flush=True)

    def emit(records: list[bytes], position: int) -> None:
        """Prints records read at selection positions position, ...; with
        rows, one that does not decode is reported like a corrupt one."""
        while records:
            if rows is None:
                out.write(b"".join(map(formatter, records)))
                return
            try:
                out.write(rows.format(records, selection.index(position)))
                return
            except RowDecodeError as error:
                out.write(rows.format(records[:error.position], selection.index(position)))
                report(selection.index(position + error.position), error.cause)
                records = records[error.position + 1:]
                position += error.position + 1
    # The bar shows when the records go to a file or a pipe, not to the terminal.
    with progress(selection.count, args.command_name, show=not sys.stdout.isatty()) as bar:
        for start in range(0, selection.count, selection.batch):
            count = min(selection.batch, selection.count - start)
            # The library's skipping scan, over positions (an --indices
            # selection may repeat an index).
            bad: list[sackli.SkippedRecord] = []
            records = read_skipping(lambda first, n: selection.fetch(start + first, n), count, count,
                                    bad.append, start.__add__)
            done, position = 0, start  # records printed, next position
            for item in bad:  # in order: print up to each damaged record, then report it
                good = item.index - position
                emit(records[done:done + good], position)
                done, position = done + good, item.index + 1
                report(selection.index(item.index), item.error)
            emit(records[done:], position)
            bar.update(count)
    out.flush()
    if skipped:
        print(f"sackli: skipped {skipped} corrupt record(s) of {selection.count}", file=sys.stderr)
        return 1
    return 0


def head(args: argparse.Namespace) -> int:
    """Prints the first N records (of a dataset folder: datapoints)."""
    if _datasets.is_dataset(args.spec):
        return _dataset_print.print_datapoints(args, slice(0, args.n))
    reader = open_reader(args.spec, args)
    return _print_selection(_range_selection(reader, slice(0, args.n)), args,
                            row_printer(reader, args), record_formatter(reader, args))


def cat(args: argparse.Namespace) -> int:
    """Prints all records, a range, or chosen indices (of a dataset folder:
    datapoints). --range and --indices are parsed by argparse (parse_range,
    parse_indices)."""
    chosen = args.indices if args.indices is not None else args.range or slice(None)
    if _datasets.is_dataset(args.spec):
        return _dataset_print.print_datapoints(args, chosen)
    reader = open_reader(args.spec, args)
    if args.indices is not None:
        selection = _index_selection(reader, args.indices)
    else:
        selection = _range_selection(reader, chosen)
    return _print_selection(selection, args, row_printer(reader, args),
                            record_formatter(reader, args))


def get(args: argparse.Namespace) -> int:
    """Prints the record at one index (of a dataset folder: the datapoint)."""
    if _datasets.is_dataset(args.spec):
        return _dataset_print.print_datapoints(args, [args.index])
    reader = open_reader(args.spec, args)
    try:
        record = reader[args.index]
    except IndexError as error:  # the user's index, not a bug: exit 2
        raise BadArgument(str(error)) from None
    rows = row_printer(reader, args)
    out: Any = sys.stdout.buffer
    if rows is None:
        out.write(record_formatter(reader, args)(record))
    else:
        index = args.index % len(reader)
        try:
            out.write(rows.format([record], index))
        except RowDecodeError as error:
            raise sackli.CorruptionError(f"index {index}: {error.cause}") from None
    out.flush()
    return 0
