"""`sackli info` and `sackli verify` for `sackli.datasets` folders (one
shard, or a folder of shard folders; local, gs:// or s3://).

The commands' own modules call in here when their SPEC names a dataset
folder (sackli.datasets' recognition rule: a folder holding spec.json or
000000/spec.json), so a dataset and a bag are never confused.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import Any, Callable

import sackli

from .._sets import describe_kind, has_zstd_suffix, sniff_folder
from ..datasets._fields import type_text
from ..datasets._layout import (
    ShardFiles, bags_file_bytes, dataset_folders, dataset_layout, layout_folders, read_field_refs,
)
from . import _reading as reading
from ._escapes import JSON_ESCAPES, escape_name
from ._errors import error_message
from ._reading import iter_batches
from ._verdict import FailFast, reporter, verdict

__all__ = ["info", "is_dataset", "refuse_bag_options", "verify"]

# Datapoints whose refs are checked at a time.
_REFS_BATCH = 65536


def is_dataset(spec: str) -> bool:
    """Whether SPEC names a dataset folder (ValueError for a local
    directory that is not one, naming what it holds when that is known,
    e.g. Parquet files)."""
    try:
        return dataset_layout(spec) is not None
    except ValueError:
        kind = sniff_folder(spec)
        if kind is None:
            raise
        raise ValueError(describe_kind(spec, kind)) from None


def refuse_bag_options(args: argparse.Namespace) -> None:
    """Bag reading options mean nothing for a dataset: say so rather than
    ignore them (a wrong argument: exit 2)."""
    reading.refuse_bag_options(args, "a dataset folder")


def _folders(spec: str) -> list[str]:
    """The dataset's shard folders (the folder itself for one shard)."""
    return dataset_folders(spec) or []


def describe(spec: str) -> dict[str, Any]:
    """Everything `info` reports about a dataset, as JSON-ready values."""
    layout = dataset_layout(spec)
    with contextlib.ExitStack() as opened:  # shards opened so far close on any error
        shards = [opened.enter_context(ShardFiles(folder))
                  for folder in (layout_folders(spec, layout) if layout else [])]
        return _facts(spec, layout, shards)


def _facts(spec: str, layout: str | None, shards: list[ShardFiles]) -> dict[str, Any]:
    """describe's report of the open shards."""
    fields: dict[str, dict[str, Any]] = {}
    for shard in shards:
        for field, ftype in shard.fields.items():
            reader = shard.field_readers[field]
            entry = fields.setdefault(field, {
                "name": field, "type": type_text(ftype),
                "file": shard.path(field).rsplit("/", 1)[-1],
                "compression": "zstd" if has_zstd_suffix(shard.path(field)) else "none",
                "records": 0, "bytes": 0})
            entry["records"] += len(reader)
            entry["bytes"] += bags_file_bytes(reader)
    refs_bytes = sum(bags_file_bytes(shard.refs) for shard in shards)
    shard_facts = [{"path": shard.directory, "datapoints": len(shard)} for shard in shards]
    return {
        "dataset": spec,
        "layout": "sharded" if layout == "sharded" else "one shard",
        "shards": shard_facts,
        "datapoints": sum(shard["datapoints"] for shard in shard_facts),
        "fields": list(fields.values()),
        "refs_bytes": refs_bytes,
        "bytes": refs_bytes + sum(entry["bytes"] for entry in fields.values()),
    }


def _print_text(facts: dict[str, Any]) -> None:
    per_shard = ", ".join(str(shard["datapoints"]) for shard in facts["shards"])
    rows = [
        ("dataset", facts["dataset"]),
        ("layout", facts["layout"]),
        ("shards", f"{len(facts['shards'])} (datapoints per shard: {per_shard})"),
        ("datapoints", facts["datapoints"]),
        ("bytes", f"{facts['bytes']} (refs.bag: {facts['refs_bytes']})"),
    ]
    for name, value in rows:
        print(f"{name + ':':<12}{escape_name(value)}")
    print("fields:")
    header = ("field", "type", "file", "compression", "records", "bytes")
    table = [header] + [(escape_name(f["name"]), escape_name(f["type"]), escape_name(f["file"]),
                         f["compression"], str(f["records"]), str(f["bytes"]))
                        for f in facts["fields"]]
    widths = [max(len(row[k]) for row in table) for k in range(len(header))]
    for row in table:  # text columns to the left, numbers to the right
        print("  " + "  ".join(cell.ljust(width) if k < 4 else cell.rjust(width)
                               for k, (cell, width) in enumerate(zip(row, widths))))


def info(args: argparse.Namespace) -> int:
    """Prints a summary of a dataset (`--json`: one JSON object)."""
    refuse_bag_options(args)
    facts = describe(args.spec)
    if args.json:
        print(json.dumps(facts, indent=2).translate(JSON_ESCAPES))
    else:
        _print_text(facts)
    return 0


def _scan_file(reader: sackli.Reader, path: str, what: str,
               report: Callable[[str], None]) -> None:
    """Decodes every record of one file, reporting each corrupt one."""

    def skipped(record: sackli.SkippedRecord) -> None:
        report(f"{what} ({path}), record {record.index}: {record.error}")

    for _ in iter_batches(reader, skip_corrupt=skipped):
        pass


def _check_refs(shard: ShardFiles, report: Callable[[str], None]) -> None:
    """Every ref within its field's file, and every record of a field
    referred to by exactly as many refs as it has records."""
    referred = dict.fromkeys(shard.fields, 0)
    for start in range(0, len(shard), _REFS_BATCH):
        count = min(_REFS_BATCH, len(shard) - start)
        try:
            refs = read_field_refs(shard, range(start, start + count), list(shard.fields))
        except sackli.CorruptionError as error:
            report(str(error))
            return
        for field, field_refs in refs.items():
            referred[field] += count if field_refs.lengths is None else int(
                sum(field_refs.lengths))
    for field, count in referred.items():
        records = len(shard.field_readers[field])
        if count != records:
            report(f"field {field!r} ({shard.path(field)}) holds {records} records, but the "
                   f"datapoints' refs ({shard.path('refs')}) refer to {count}")


def _check_shard(folder: str, report: Callable[[str], None]) -> tuple[int, Any]:
    """Checks one shard folder; returns its number of datapoints and its
    parsed spec (None when it cannot be opened)."""
    try:
        shard = ShardFiles(folder)
    except (sackli.CorruptionError, OSError, ValueError) as error:
        report(f"shard {folder} cannot be opened: {error_message(error)}")
        return 0, None
    with shard:
        _scan_file(shard.refs, shard.path("refs"), "refs", report)
        for field, field_reader in shard.field_readers.items():
            _scan_file(field_reader, shard.path(field), f"field {field!r}", report)
        _check_refs(shard, report)
        return len(shard), shard.fields


def verify(args: argparse.Namespace) -> int:
    """Checks a dataset; prints each problem; exit status 1 if there is any."""
    refuse_bag_options(args)
    problems: list[str] = []

    report = reporter(problems, args.fail_fast, [])

    folders = _folders(args.spec)
    datapoints = 0
    specs = []
    try:
        for folder in folders:
            count, fields = _check_shard(folder, report)
            datapoints += count
            specs.append(fields)
        for folder, fields in zip(folders[1:], specs[1:]):
            if fields is not None and specs[0] is not None and fields != specs[0]:
                report(f"shard {folder}: its spec.json differs from that of {folders[0]}")
    except FailFast:
        return verdict(problems, f"dataset {args.spec}", "", stopped=True)
    return verdict(problems, f"dataset {args.spec}",
                   f"verify: OK, dataset of {datapoints} datapoints in {len(folders)} shard(s)")
