"""`sackli head`, `cat`, `get`, `count` and `schema` of a `sackli.datasets`
(bags) folder: datapoints, not records.

- head / cat / get print datapoints: `--format json` one JSON object per
  line (fields in spec order), `--format text` (the default) a table like
  that of rows (column names once, one line per datapoint, long values cut).
  Values print as the built-in decoders read them: ints and strings as
  themselves, msgpack values as JSON, arrays as nested lists; `bytes` fields
  and media fields (jpeg, png, mp4) and custom types print as their stored
  bytes, in base64 in JSON (as rows print binary columns). NaN and
  infinities print as "NaN", "Infinity", "-Infinity" (valid JSON).
- count prints the number of datapoints.
- schema prints the fields and their types (`--json`: the spec as a dict,
  what DatasetWriter takes).

The selection (--range, --indices, -n, INDEX) counts datapoints;
--skip-corrupt goes on past datapoints that do not read, as for records.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import sys
from typing import Any, Iterator

import sackli

from ..datasets import DatasetReader, ShardedDatasetReader, decoders as builtin_decoders
from ..datasets._fields import bytes_identity, type_text
from ..datasets._layout import dataset_layout
from ._cells import CELL_CHARS, header_cells, table_cell, table_line
from ._escapes import JSON_ESCAPES, escape_name
from ._datasets import refuse_bag_options
from ._errors import UsageError
from ._progress import progress

__all__ = ["count", "print_datapoints", "schema"]

# Datapoints read (and printed) at a time.
_BATCH = 256
# Types printed as their decoded values; the others (images, video, custom
# codecs) as their stored bytes: a picture as a list of pixels helps nobody.
_DECODED_TYPES = ("bytes", "utf8", "msgpack", "int", "array")


class _Decoders(dict):
    """The built-in decoders of _DECODED_TYPES; any other type reads as
    its stored bytes."""

    def __missing__(self, dtype: str) -> Any:
        return bytes_identity


def open_dataset(spec: str) -> DatasetReader | ShardedDatasetReader:
    """The dataset folder `spec` opened for printing."""
    decoders = _Decoders({name: builtin_decoders[name] for name in _DECODED_TYPES})
    if dataset_layout(spec) == "sharded":
        return ShardedDatasetReader(spec, decoders=decoders)
    return DatasetReader(spec, decoders=decoders)


def count(args: argparse.Namespace) -> int:
    """Prints the number of datapoints."""
    with open_dataset(args.spec) as reader:
        print(len(reader))
    return 0


def _fields(reader: DatasetReader | ShardedDatasetReader) -> dict[str, str]:
    """Field name -> type, as spec.json spells it."""
    return {field: type_text(ftype) for field, ftype in reader.spec.items()}


def schema(args: argparse.Namespace) -> int:
    """Prints the dataset's fields and types (`--json`: one JSON object)."""
    with open_dataset(args.spec) as reader:
        fields = _fields(reader)
        shards = reader.shards if isinstance(reader, ShardedDatasetReader) else 1
    layout = "sharded" if dataset_layout(args.spec) == "sharded" else "one shard"
    if args.json:
        print(json.dumps({"dataset": args.spec, "layout": layout, "shards": shards,
                          "spec": fields}, indent=2).translate(JSON_ESCAPES))
        return 0
    print(f"dataset: {escape_name(args.spec)} ({layout}, {shards} shard(s))")
    print("fields:")
    shown = {escape_name(field): escape_name(ftype) for field, ftype in fields.items()}
    width = max((len(field) for field in shown), default=0)
    for field, ftype in shown.items():
        print(f"  {field.ljust(width)}  {ftype}")
    return 0


def jsonable(value: Any) -> Any:
    """`value` as JSON-ready Python values: bytes as base64 text, arrays as
    lists, non-finite floats as their texts."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {str(jsonable(key)) if not isinstance(key, str) else key: jsonable(item)
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return jsonable(value.tolist())
    return value


def _check_options(args: argparse.Namespace) -> None:
    """Bag options mean nothing for a dataset: wrong arguments (exit 2)."""
    if args.format not in ("text", "json"):
        raise UsageError(f"{args.spec} is a dataset folder: its datapoints print as text or "
                         f"json, not {args.format}")
    if args.decode != "auto":
        raise UsageError(f"{args.spec} is a dataset folder; --decode is for bags")


def _positions(size: int, chosen: slice | list[int]) -> list[int]:
    """The datapoint indices a selection names (every index checked first)."""
    if isinstance(chosen, slice):
        return list(range(*chosen.indices(size)))
    for index in chosen:
        if not -size <= index < size:  # a wrong argument for this dataset: exit 2
            raise UsageError(f"index {index} out of range for a dataset of {size} datapoints")
    return [index % size for index in chosen]


class _Table:
    """Datapoints as table lines: column names once, then one line each."""

    def __init__(self) -> None:
        self._widths: list[int] | None = None

    def lines(self, datapoints: list[dict]) -> bytes:
        cells = [[table_cell(value if isinstance(value, (str, bytes)) else
                        json.dumps(jsonable(value), ensure_ascii=False))
                  for value in point.values()] for point in datapoints]
        out = []
        if self._widths is None and datapoints:
            names = header_cells(list(datapoints[0]))
            self._widths = [min(CELL_CHARS, max([len(name), *(len(row[k]) for row in cells)]))
                            for k, name in enumerate(names)]
            out.append(table_line(names, self._widths))
        out.extend(table_line(row, self._widths or []) for row in cells)
        return b"".join(out)


def _json_lines(datapoints: list[dict]) -> bytes:
    # DEL and C1 as escapes, as for records.
    return b"".join(json.dumps(jsonable(point), ensure_ascii=False, allow_nan=False,
                               separators=(",", ":"))
                    .translate(JSON_ESCAPES).encode("utf-8") + b"\n" for point in datapoints)


def _read(reader: Any, indices: list[int], report: Any) -> Iterator[dict]:
    """The datapoints at `indices`, a batch at a time; a batch that fails
    is read one by one, and each datapoint that does not read goes to
    `report(index, error)`."""
    try:
        yield from reader.read_indices(indices)
        return
    except (sackli.CorruptionError, ValueError, OSError):
        pass  # which one? read them one at a time
    for index in indices:
        try:
            point = reader[index]
        except (sackli.CorruptionError, ValueError, OSError) as error:
            report(index, error)
            continue
        yield point


def print_datapoints(args: argparse.Namespace, chosen: slice | list[int]) -> int:
    """Prints the datapoints `chosen` (a slice or indices) of the dataset
    args.spec; returns the exit status."""
    refuse_bag_options(args)
    _check_options(args)
    skip_corrupt = getattr(args, "skip_corrupt", False)  # get has no --skip-corrupt
    try:
        return _print_all(args, chosen, skip_corrupt)
    except ImportError as error:  # numpy for arrays: an install to make, not a bug
        raise ValueError(f"{args.spec}: {error}") from None


def _print_all(args: argparse.Namespace, chosen: slice | list[int], skip_corrupt: bool) -> int:
    """print_datapoints' loop: reads and prints a batch at a time."""
    out = sys.stdout.buffer
    table = _Table()
    skipped = 0

    def report(index: int, error: BaseException) -> None:
        nonlocal skipped
        out.flush()
        if not skip_corrupt:
            raise sackli.CorruptionError(f"datapoint {index}: {error} (--skip-corrupt goes on "
                                         "past it)") from None
        skipped += 1
        bar.clear()
        print(f"sackli: skipped datapoint {index}: {escape_name(error)}", file=sys.stderr, flush=True)

    with open_dataset(args.spec) as reader:
        positions = _positions(len(reader), chosen)
        with progress(len(positions), args.command_name, unit=" datapoints",
                      show=not sys.stdout.isatty()) as bar:
            for start in range(0, len(positions), _BATCH):
                batch = positions[start:start + _BATCH]
                points: list[dict] = []
                try:
                    points.extend(_read(reader, batch, report))
                finally:  # what came before a damaged datapoint prints first
                    out.write(_json_lines(points) if args.format == "json"
                              else table.lines(points))
                bar.update(len(batch))
    out.flush()
    if skipped:
        print(f"sackli: skipped {skipped} datapoint(s) of {len(positions)}", file=sys.stderr)
        return 1
    return 0
