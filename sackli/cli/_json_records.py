"""JSON Lines exports of `sackli convert` that give back what went in, and
the files that say what a bag's records are.

JSON Lines -> bag: a file holding any value other than a string (an object,
a number, null, a list...) is read as JSON texts: each record is its line's
JSON text, a string's quotes included, and the bag gets a companion file
`<set>.record_format` (`x.bag.record_format`, or for `x@4.bag`
`x-of-00004.bag.record_format`, as schema files are named) holding
`{"records": "json"}`. A file of strings only is text, as before: each
record is a string's UTF-8, and the bag is not marked, so that bag -> JSON
Lines -> bag gives back the same records. (`--jsonl-base64` reads a file
as byte records, as before, and does not mark the bag.)

Bag -> JSON Lines: a marked bag's records are written as the JSON values
they are, so in.jsonl -> bag -> out.jsonl gives back the same values. A row
bag (an `.arrow_schema` beside it, from Parquet or write_table) gives one
JSON object per row, as `sackli head --format json` prints them. Any other
bag, or `--decode raw`: UTF-8 records as JSON strings, others an error
unless `--jsonl-base64`.

Bag -> bag: both files follow the records to the new set, and a stale one
beside a replaced set (`--force`) goes.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Iterator

from .. import CorruptionError
from .._sets import find_schema_file, schema_path, set_file_path
from ..formats import holds_only_strings
from ._endpoints import BAG, JSON_LINES, Source
from ._reading import open_reader
from .._storage import delete_objects, object_exists, read_object, write_object

if TYPE_CHECKING:
    from ._rows import RowPrinter

__all__ = ["RECORD_FORMAT_SUFFIX", "bag_holds_json_texts", "finish_bag_set", "mark_bag_set",
           "records_are_json_texts", "row_json_printer", "rows_as_json"]

RECORD_FORMAT_SUFFIX = ".record_format"
_JSON_TEXTS = {"records": "json"}


def record_format_path(path_or_spec: str) -> str:
    """Where the record format file of a bag set is (see the module docstring)."""
    return set_file_path(path_or_spec, RECORD_FORMAT_SUFFIX)


def bag_holds_json_texts(spec: str) -> bool:
    """Whether the bag set `spec` (its first entry) is marked as holding
    JSON texts. CorruptionError for a record format file sackli did not
    write."""
    path = record_format_path(spec)
    if not object_exists(path):
        return False
    try:
        content = json.loads(read_object(path))
    except ValueError:
        content = None
    if content != _JSON_TEXTS:
        raise CorruptionError(f"{path}: not a sackli record format file (expected "
                              f"{json.dumps(_JSON_TEXTS)})")
    return True


def _first_bag_file(source: Source) -> str:
    """The first file of a bag source, however named (a spec, a glob, a
    comma list): its set's companion files are the source's."""
    return open_reader(source.spec, source.args).paths[0]


def records_are_json_texts(source: Source) -> bool:
    """Whether the records of `source` are JSON texts: a bag set marked so
    (unless read with --decode raw), or JSON Lines holding a value that is
    not a string (unless --jsonl-base64, which reads byte records)."""
    if source.kind == BAG:
        return source.args.decode != "raw" and bag_holds_json_texts(_first_bag_file(source))
    if source.kind == JSON_LINES:
        return not source.args.jsonl_base64 and not holds_only_strings(source.paths())
    return False


def _set_companion(path: str, data: bytes | None) -> None:
    """Writes `data` to `path`, or with None removes a stale file there."""
    if data is not None:
        write_object(path, data)
    elif object_exists(path):
        delete_objects([path])


def mark_bag_set(written: list[str], json_texts: bool) -> None:
    """Marks the bag set `written` as holding JSON texts, or removes a stale
    mark beside it."""
    mark = (json.dumps(_JSON_TEXTS) + "\n").encode() if json_texts else None
    _set_companion(record_format_path(written[0]), mark)


def finish_bag_set(written: list[str], source: Source) -> None:
    """After `convert` published the bag set `written` from `source`: marks
    it when the records are JSON texts (see `mark_bag_set`), and gives it
    the schema file of a bag source (or, without one, removes a stale
    schema file), so that rows stay rows."""
    mark_bag_set(written, source.json_texts)
    schema = find_schema_file(_first_bag_file(source)) if source.kind == BAG else None
    _set_companion(schema_path(written[0]), read_object(schema) if schema is not None else None)


def row_json_printer(spec: str, args: argparse.Namespace) -> "RowPrinter | None":
    """The printer (sackli/cli/_rows.py) that turns the records of the row
    bag `spec` into JSON objects, as `head --format json` does; None for a
    bag that is not rows (no schema file, or `--decode raw`)."""
    from ._rows import row_printer

    return row_printer(open_reader(spec, args), argparse.Namespace(decode=args.decode,
                                                                   format="json"))


def rows_as_json(batches: Iterator[list[bytes]], printer: "RowPrinter",
                 source: str) -> Iterator[list[bytes]]:
    """The batches of row records as batches of JSON object texts, one per
    row. CorruptionError for a record that is not a row of the schema."""
    from ._rows import RowDecodeError

    done = 0
    for batch in batches:
        try:
            lines = printer.format(batch, done)
        except RowDecodeError as error:
            raise CorruptionError(f"{source}: record {done + error.position} is not a row of "
                                  f"its schema: {error.cause}") from None
        yield lines.split(b"\n")[:-1]  # JSON escapes every newline inside a value
        done += len(batch)
