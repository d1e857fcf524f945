"""Printing the rows of row-encoded bags (`sackli head`, `cat`, `get`).

A bag written by `sackli.arrow.write_table` with `encoding="row"`,
`"arrow"` or `"json"` has a schema file beside it; with `--decode auto` (the default, as
for `convert`) its records are decoded through that schema and printed as
rows: `--format json` one JSON object per line, `--format text` a table
(column names once, then one line per row). `--format raw` and `hex` print
the records' bytes, and `--decode raw` prints any bag's records as they
are. Decoding needs pyarrow (the `arrow` extra); without it `auto` prints
the records as they are.

JSON output follows `encoding="json"`'s conventions (see
sackli/arrow/_json_types.py): timestamps, dates and decimals as text,
binary as base64, NaN and infinities as "NaN", "Infinity", "-Infinity", so
every line is valid JSON.
"""

from __future__ import annotations

import argparse
import array
import itertools
import json
from typing import Any, Callable

import sackli

from ._cells import CELL_CHARS, header_cells, table_cell, table_line

DECODE_CHOICES = ["auto", "row", "arrow", "json", "raw"]
DECODE_HELP = ("how records become rows: auto (default) decodes rows written by "
               "sackli.arrow.write_table through the schema file beside the bag, and prints "
               "other bags' records as they are; row / arrow / json force that decoding "
               "(arrow: either Arrow row codec, as the schema file says); raw prints every "
               "record as it is")


class RowDecodeError(Exception):
    """Record `position` (within the records handed over) is not a row of
    the schema; `cause` says why."""

    def __init__(self, position: int, cause: Exception) -> None:
        super().__init__(str(cause))
        self.position = position
        self.cause = cause


def row_printer(reader: sackli.Reader, args: argparse.Namespace) -> "RowPrinter | None":
    """The printer of the reader's rows, or None when its records print as
    they are (raw or hex output, --decode raw, or no schema file)."""
    choice = args.decode
    if choice == "raw" or args.format in ("raw", "hex"):
        return None
    try:
        from ..arrow._codecs import resolve_rows
    except ImportError:
        if choice == "auto":
            return None
        raise ValueError(f"--decode {choice} needs pyarrow: pip install 'sackli-bagz[arrow]'") from None

    rows = resolve_rows(reader, choice, None)
    if rows.decode is None:
        return None
    decoder = rows.decoder(None)
    return RowPrinter(decoder, args.format, reader.paths[0])


class RowPrinter:
    """Decodes batches of records into rows and formats them."""

    def __init__(self, decoder: Any, output: str, source: str) -> None:
        self._decoder = decoder
        self._source = source
        self._format: Callable[[list[dict]], bytes] = (
            self._json_lines if output == "json" else self._table_lines)
        self._widths: list[int] | None = None  # the table's, from the first rows printed

    def format(self, records: list[bytes], first_index: int) -> bytes:
        """The printed rows of `records` (record k is the bag's index
        `first_index + k` where they are consecutive, for messages).
        Raises RowDecodeError naming the first record that does not decode."""
        if not records:
            return b""
        try:
            rows = self._decode(records, first_index)
        except ValueError:
            # Which record? Decode one at a time up to it.
            for position, record in enumerate(records):
                try:
                    self._decode([record], first_index + position)
                except ValueError as error:
                    raise RowDecodeError(position, error) from None
            raise
        return self._format(rows)

    def _decode(self, records: list[bytes], first_index: int) -> list[dict]:
        # Laid out as read_batches hands records to the decoder: after its
        # prefix (the schema message, for "arrow" rows).
        prefix = self._decoder.prefix
        offsets = array.array("q", itertools.accumulate(map(len, records), initial=len(prefix)))
        data = prefix + b"".join(records)
        return self._decoder.decode(data, memoryview(offsets), self._source, first_index).to_pylist()

    def _json_lines(self, rows: list[dict]) -> bytes:
        from ..arrow._codecs import dump_row

        return b"".join(dump_row(row).encode("utf-8") + b"\n" for row in rows)

    def _table_lines(self, rows: list[dict]) -> bytes:
        cells = [[table_cell(value) for value in row.values()] for row in rows]
        lines = []
        if self._widths is None:
            names = header_cells(list(rows[0]))
            self._widths = [min(CELL_CHARS, max([len(name), *(len(row[i]) for row in cells)]))
                            for i, name in enumerate(names)]
            lines.append(table_line(names, self._widths))
        lines.extend(table_line(row, self._widths) for row in cells)
        return b"".join(lines)


def _not_a_bag(spec: str) -> None:
    """Raises ValueError naming what `spec` is when it does not open as a
    bag and is recognisably something else (a Parquet file, a map...)."""
    from .._sets import explain_open_failure

    try:
        sackli.Reader(spec).close()
    except (sackli.CorruptionError, OSError) as error:
        explain_open_failure(spec, error)


def schema(args: argparse.Namespace) -> int:
    """`sackli schema SPEC`: prints the Arrow schema of a row-encoded bag
    and its encoding (FileNotFoundError without a schema file); of a
    dataset folder, its fields and types."""
    from . import _dataset_print, _datasets

    if _datasets.is_dataset(args.spec):
        return _dataset_print.schema(args)
    try:
        from ..arrow._codecs import find_schema_file, read_set_schema
        from ..arrow import schema_path
    except ImportError:
        _not_a_bag(args.spec)
        raise ValueError("sackli schema needs pyarrow: pip install 'sackli-bagz[arrow]'") from None
    try:
        stored, encoding = read_set_schema(args.spec)
    except (OSError, ValueError):
        _not_a_bag(args.spec)  # no schema beside a Parquet file: say what it is
        raise
    path = find_schema_file(args.spec) or schema_path(args.spec)
    if args.json:
        fields = [{"name": field.name, "type": str(field.type), "nullable": field.nullable}
                  for field in stored]
        print(json.dumps({"schema_file": path, "encoding": encoding, "fields": fields}, indent=2))
        return 0
    print(f"schema file: {path}")
    print(f"encoding:    {encoding}")
    print(stored.to_string(show_schema_metadata=False))
    return 0
