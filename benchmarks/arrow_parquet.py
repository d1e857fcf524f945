"""Parquet -> bag shards -> Arrow, against pyarrow.parquet on the same table.

Generates a deterministic table of ~1 KiB rows (ids, a category, floats, a
timestamp, a list and ~900 bytes of moderately compressible text), writes
it as Parquet, then times, `--repeat` times each, median shown:

  parquet write / read      pyarrow.parquet.write_table / read_table
  rows -> bagz (arrow)      sackli.arrow.write_table(parquet, "x@8.bagz")
  bagz -> table (arrow)     sackli.arrow.read_table("x@*.bagz", decode="arrow")
  rows -> bag (json)        ... encoding="json" into uncompressed shards
  bag -> table (json)       ... decode="json"
  column -> bag             write_table(column="text"): one record per value
  bag -> records            read_table("x.bag"): the raw records, zero-copy

MB/s is the size of the table in memory (Table.nbytes) per second.

    python benchmarks/arrow_parquet.py             # ~1 GB of rows
    python benchmarks/arrow_parquet.py --quick     # ~100 MB, under a minute
    python benchmarks/arrow_parquet.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import sackli
import sackli.arrow

_TEXT_BYTES = 900


def make_table(rows: int, seed: int = 0) -> pa.Table:
    """A deterministic table of about 1 KiB per row."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnop"))
    words = np.array(["".join(rng.choice(letters, rng.integers(2, 10))) for _ in range(512)])
    per_row = _TEXT_BYTES // 6
    picks = rng.integers(0, len(words), size=(rows, per_row))
    text = [" ".join(words[row])[:_TEXT_BYTES] for row in picks]
    return pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "category": pa.array(rng.integers(0, 50, rows).astype(str)).dictionary_encode(),
        "value": pa.array(rng.random(rows)),
        "time": pa.array(np.arange(rows, dtype=np.int64) * 1_000_000, pa.timestamp("us", "UTC")),
        "tags": pa.array(list(rng.integers(0, 100, size=(rows, 4)).astype(np.int32))),
        "text": pa.array(text),
    })


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """(median seconds, last result) of `repeat` runs."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def folder_bytes(folder: str, prefix: str) -> int:
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)
               if f.startswith(prefix))


def run(rows: int, repeat: int, folder: str) -> dict[str, Any]:
    table = make_table(rows)
    parquet = os.path.join(folder, "table.parquet")
    nbytes = table.nbytes

    def fresh(prefix: str) -> str:
        for name in os.listdir(folder):
            if name.startswith(prefix):
                os.remove(os.path.join(folder, name))
        return os.path.join(folder, prefix)

    cases: list[tuple[str, str, Callable[[], Any]]] = [
        ("parquet write", "table.parquet", lambda: pq.write_table(table, parquet)),
        ("parquet read", "table.parquet", lambda: pq.read_table(parquet)),
        ("rows -> bagz (arrow)", "arrow",
         lambda: sackli.arrow.write_table(parquet, fresh("arrow") + "@8.bagz", progress=False)),
        ("bagz -> table (arrow)", "arrow",
         lambda: sackli.arrow.read_table(os.path.join(folder, "arrow@*.bagz"), decode="arrow")),
        ("rows -> bag (json)", "json",
         lambda: sackli.arrow.write_table(parquet, fresh("json") + "@8.bag", encoding="json",
                                          progress=False)),
        ("bag -> table (json)", "json",
         lambda: sackli.arrow.read_table(os.path.join(folder, "json@*.bag"), decode="json")),
        ("column -> bag", "text",
         lambda: sackli.arrow.write_table(table, fresh("text") + ".bag", column="text",
                                          progress=False)),
        ("bag -> records", "text",
         lambda: sackli.arrow.read_table(os.path.join(folder, "text.bag"))),
    ]
    results = []
    for name, prefix, fn in cases:
        seconds, result = timed(fn, repeat)
        if isinstance(result, pa.Table) and name != "bag -> records":
            assert result.num_rows == rows, (name, result.num_rows)
        results.append({
            "workload": name,
            "seconds": seconds,
            "rows_per_s": rows / seconds,
            "mb_per_s": (nbytes if prefix != "text" else table.column("text").nbytes) / seconds / 1e6,
            "stored_mb": folder_bytes(folder, prefix) / 1e6,
        })
        print(f"  {name:<22} {seconds:8.3f} s", flush=True)
    return {"rows": rows, "table_mb": nbytes / 1e6, "results": results}


def print_table(report: dict[str, Any]) -> None:
    print(f"\n{report['rows']:,} rows, {report['table_mb']:.0f} MB in memory; "
          f"medians of {report['repeat']}")
    print(f"| {'workload':<22} | {'seconds':>8} | {'rows/s':>10} | {'MB/s':>7} | {'stored MB':>9} |")
    print(f"|{'-' * 24}|{'-' * 10}|{'-' * 12}|{'-' * 9}|{'-' * 11}|")
    for r in report["results"]:
        print(f"| {r['workload']:<22} | {r['seconds']:>8.2f} | {r['rows_per_s']:>10,.0f} | "
              f"{r['mb_per_s']:>7.0f} | {r['stored_mb']:>9.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="~100 MB instead of ~1 GB")
    parser.add_argument("--rows", type=int, help="rows in the table (default 1,000,000)")
    parser.add_argument("--repeat", type=int, help="runs per workload (default 3, quick 1)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--dir", help="where to write the files (default: a temporary folder)")
    args = parser.parse_args()
    rows = args.rows or (100_000 if args.quick else 1_000_000)
    repeat = args.repeat or (1 if args.quick else 3)
    folder = tempfile.mkdtemp(prefix="sackli-arrow-bench-", dir=args.dir)
    try:
        print(f"building {rows:,} rows in {folder}", flush=True)
        report = run(rows, repeat, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report.update(repeat=repeat, machine=f"{platform.machine()}, {os.cpu_count()} cores",
                  python=platform.python_version(), pyarrow=pa.__version__,
                  sackli=sackli.__version__)
    print_table(report)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(report, file, indent=2)


if __name__ == "__main__":
    main()
