"""`sackli info` and `sackli count`: what a bag holds."""

from __future__ import annotations

import argparse
import collections
import itertools
import json
from typing import Any

import sackli

from .._bulk import LIMIT_BYTES, read_packed
from .._sets import find_schema_file, has_zstd_suffix
from . import _dataset_print, _datasets
from ._escapes import JSON_ESCAPES, escape_name
from ._progress import progress
from ._reading import open_reader

_HISTOGRAM_BAR = 40
_SIZE_BATCH_RECORDS = 65536


def count(args: argparse.Namespace) -> int:
    """Prints the number of records (of a dataset folder: datapoints)."""
    if _datasets.is_dataset(args.spec):
        _datasets.refuse_bag_options(args)
        return _dataset_print.count(args)
    print(len(open_reader(args.spec, args)))
    return 0


def _size_bucket(size: int) -> tuple[int, int]:
    """The power-of-two bucket [low, high] holding `size`: 0, 1, 2-3, 4-7..."""
    if size == 0:
        return 0, 0
    low = 1 << (size.bit_length() - 1)
    return low, 2 * low - 1


def _median(sizes: collections.Counter[int], total: int) -> float:
    """The median of a multiset of sizes given as counts."""
    middle = [(total - 1) // 2, total // 2]
    found: list[int] = []
    seen = 0
    for size in sorted(sizes):
        seen += sizes[size]
        while middle and middle[0] < seen:
            middle.pop(0)
            found.append(size)
    return sum(found) / 2


def _compression(paths: list[str], args: argparse.Namespace) -> str:
    if args.read_dictionary:
        return "zstd with dictionary"
    kinds = collections.Counter("zstd" if has_zstd_suffix(path) else "none" for path in paths)
    if len(kinds) == 1:
        return next(iter(kinds))
    return "mixed (" + ", ".join(f"{kind}: {n} files" for kind, n in sorted(kinds.items())) + ")"


def _record_sizes(reader: sackli.Reader) -> collections.Counter[int]:
    """How many records of each decoded size the reader holds (with a
    progress bar on a terminal: compressed records are decoded)."""
    sizes: collections.Counter[int] = collections.Counter()
    batch = _SIZE_BATCH_RECORDS
    with progress(len(reader), "info") as bar:
        for start in range(0, len(reader), batch):
            count = min(batch, len(reader) - start)
            offsets = memoryview(read_packed(reader, start, count)[1])
            sizes.update(end - begin for begin, end in itertools.pairwise(offsets))
            bar.update(count)
    return sizes


def describe(spec: str, args: argparse.Namespace) -> dict[str, Any]:
    """Everything `info` reports about a bag, as JSON-ready values.

    Record sizes are decoded sizes: uncompressed records are measured from
    their limits; compressed ones are decoded (in parallel, in bounded-memory
    batches, without a Python object per record).
    """
    reader = open_reader(spec, args)
    sizes = _record_sizes(reader)
    histogram: collections.Counter[tuple[int, int]] = collections.Counter()
    for size, n in sizes.items():
        histogram[_size_bucket(size)] += n
    paths = list(reader.paths)
    return {
        "spec": spec,
        "shards": [{"path": p, "records": n} for p, n in zip(paths, reader.shard_sizes)],
        "records": len(reader),
        "payload_bytes": reader.stored_bytes,
        "limits_bytes": LIMIT_BYTES * len(reader),
        "compression": _compression(paths, args),
        "row_encoding": row_encoding(paths[0]),
        "limits_placement": args.limits_placement,
        "layout": args.layout,
        "record_size": {
            "min": min(sizes, default=0),
            "median": _median(sizes, len(reader)) if sizes else 0,
            "max": max(sizes, default=0),
        },
        "size_histogram": [
            {"min": low, "max": high, "count": histogram[low, high]}
            for low, high in sorted(histogram)
        ],
    }


def row_encoding(path: str) -> str | None:
    """How the records encode rows, from the schema file beside the bag
    (`sackli.arrow.write_table`): "row", "arrow", "json"; None without one;
    "unknown (...)" when it cannot be read here."""
    try:
        from ..arrow import row_encoding as stored_encoding
    except ImportError:
        if find_schema_file(path) is None:
            return None
        return "unknown (install pyarrow to read the schema file)"
    return stored_encoding(path)


def _describe_rows(encoding: str | None) -> str:
    if encoding is None:
        return "none (raw records: no schema file)"
    return f"{encoding} (rows written by sackli.arrow.write_table; sackli schema shows them)"


def _format_median(median: float) -> str:
    return str(int(median)) if median == int(median) else f"{median:.1f}"


def _print_text(facts: dict[str, Any]) -> None:
    shard_sizes = ", ".join(str(shard["records"]) for shard in facts["shards"])
    size = facts["record_size"]
    rows = [
        ("spec", facts["spec"]),
        ("shards", f"{len(facts['shards'])} (records per shard: {shard_sizes})"),
        ("records", facts["records"]),
        ("payload bytes", f"{facts['payload_bytes']} (as stored)"),
        ("limits bytes", facts["limits_bytes"]),
        ("compression", facts["compression"]),
        ("rows", _describe_rows(facts["row_encoding"])),
        ("limits placement", facts["limits_placement"]),
        ("layout", facts["layout"]),
        ("record size", f"min {size['min']}, median {_format_median(size['median'])}, "
                        f"max {size['max']} (bytes, decoded)"),
    ]
    for name, value in rows:
        print(f"{name + ':':<18}{escape_name(value)}")
    buckets = facts["size_histogram"]
    if not buckets:
        return
    print("size histogram:")
    most = max(bucket["count"] for bucket in buckets)
    for bucket in buckets:
        low, high = bucket["min"], bucket["max"]
        label = f"{low}" if low == high else f"{low}-{high}"
        bar = "#" * max(1, round(_HISTOGRAM_BAR * bucket["count"] / most))
        print(f"  {label:>13} B  {bucket['count']:>10}  {bar}")


def info(args: argparse.Namespace) -> int:
    """Prints a summary of a bag (`--json`: one JSON object)."""
    if _datasets.is_dataset(args.spec):
        return _datasets.info(args)
    facts = describe(args.spec, args)
    if args.json:
        print(json.dumps(facts, indent=2).translate(JSON_ESCAPES))
    else:
        _print_text(facts)
    return 0
