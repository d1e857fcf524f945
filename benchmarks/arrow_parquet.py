"""Parquet -> bag shards -> Arrow, against pyarrow.parquet on the same table.

Two deterministic tables (`--table`): `wide`, ~1 KiB rows (ids, a
category, floats, a timestamp, a list and ~900 bytes of moderately
compressible text), and `mixed`, issue 17's narrow rows of 14 mixed columns
(ints, floats, strings, timestamps with time zones, a date, a decimal,
lists, a struct, a bool, nulls in most). Each is written as Parquet, then
timed, `--repeat` times each, median shown:

  parquet write / read      pyarrow.parquet.write_table / read_table
  rows -> bagz (row)        sackli.arrow.write_table(table, "x@8.bagz") of the
                            same in-memory table Parquet writes,
                            encoding="row" (the default): the engine's codec,
                            zstd literals chosen on the first rows
  rows -> bagz (row, huffman)       the same with CompressionZstd(3) given
                            (Huffman-coded literals whatever the rows)
  bagz -> table (row)       sackli.arrow.read_table("x@*.bagz")
  parquet file -> bagz (row)  write_table("table.parquet", ...): the conversion
                            a user runs, Parquet's read included
  bagz -> 2 columns (row)   ... columns=[two of them]
  rows -> bagz (row, zstd -1)       the same at zstd level -1 (and reading it)
  rows -> bag / bag -> table (row)  the same into uncompressed .bag shards
  rows -> bagz (json)       ... encoding="json"
  bagz -> table (json)      ... decode="json"
  rows -> bagz (arrow IPC)  ... encoding="arrow" (with --ipc: slow, large)
  bagz -> table (arrow IPC)
  column -> bag             (wide) write_table(column="text"): one record per value
  bag -> records            (wide) read_table("x.bag"): the raw records, zero-copy

Then the ratios of issue 17's goals: row-codec read and write time over
Parquet's (goal: at most 3x) and its stored size over JSON .bagz's (goal:
at most 1.5x). MB/s is the size of the table in memory (Table.nbytes) per
second.

    python benchmarks/arrow_parquet.py --table mixed              # 500k rows
    python benchmarks/arrow_parquet.py --table mixed --rows 50000 # quick
    python benchmarks/arrow_parquet.py             # wide, ~1 GB of rows
    python benchmarks/arrow_parquet.py --quick     # wide, ~100 MB, under a minute
    python benchmarks/arrow_parquet.py --json out.json
"""

from __future__ import annotations

import argparse
import decimal
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


def make_mixed_table(rows: int, seed: int = 0) -> pa.Table:
    """Issue 17's table: 14 mixed columns of narrow rows, nulls in most."""
    rng = np.random.default_rng(seed)
    words = np.array(["ab", "cde", "fghij", "klm", "nopqrs", "t", "uvwxyz", "Zürich"])

    def nulls(share: float) -> np.ndarray:
        return rng.random(rows) < share

    def strings(count: int) -> list[str]:
        return list(words[rng.integers(0, len(words), count)])

    tag_counts = rng.integers(0, 4, rows)
    tag_offsets = np.concatenate([[0], np.cumsum(tag_counts)]).astype(np.int32)
    score_offsets = np.arange(0, 2 * rows + 1, 2, dtype=np.int32)
    cents = rng.integers(0, 10**8, rows)
    return pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "user": pa.array(rng.integers(0, 10**6, rows).astype(np.int32)),
        "score": pa.array(rng.random(rows)),
        "ratio": pa.array(rng.random(rows).astype(np.float32), mask=nulls(0.1)),
        "name": pa.array(strings(rows)),
        "city": pa.array(strings(rows), mask=nulls(0.2)),
        "event_time": pa.array(rng.integers(0, 2**50, rows), pa.timestamp("us", "Europe/Paris")),
        "created": pa.array(rng.integers(0, 2**40, rows), pa.timestamp("ms", "UTC"),
                            mask=nulls(0.1)),
        "day": pa.array(rng.integers(0, 20000, rows).astype(np.int32), pa.int32()).cast(
            pa.date32()),
        "price": pa.array([decimal.Decimal(int(c)).scaleb(-2) for c in cents],
                          pa.decimal128(12, 2), mask=nulls(0.05)),
        "tags": pa.ListArray.from_arrays(tag_offsets, pa.array(strings(int(tag_offsets[-1]))),
                                         mask=pa.array(nulls(0.1))),
        "scores": pa.ListArray.from_arrays(
            score_offsets, pa.array(rng.integers(0, 100, 2 * rows).astype(np.int32),
                                    mask=rng.random(2 * rows) < 0.1)),
        "point": pa.StructArray.from_arrays(
            [pa.array(rng.random(rows)), pa.array(rng.random(rows)), pa.array(strings(rows))],
            names=["x", "y", "label"], mask=pa.array(nulls(0.1))),
        "flag": pa.array(rng.random(rows) < 0.5, mask=nulls(0.1)),
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


def run(table: pa.Table, repeat: int, folder: str, wide: bool, ipc: bool) -> dict[str, Any]:
    rows = table.num_rows
    parquet = os.path.join(folder, "table.parquet")
    nbytes = table.nbytes
    two = ["id", "text"] if wide else ["user", "price"]

    def fresh(prefix: str) -> str:
        for name in os.listdir(folder):
            if name.startswith(prefix):
                os.remove(os.path.join(folder, name))
        return os.path.join(folder, prefix)

    def bags(prefix: str) -> str:
        return os.path.join(folder, prefix + "@*.bagz")

    cases: list[tuple[str, str, Callable[[], Any]]] = [
        ("parquet write", "table.parquet", lambda: pq.write_table(table, parquet)),
        ("parquet read", "table.parquet", lambda: pq.read_table(parquet)),
        ("rows -> bagz (row)", "row",
         lambda: sackli.arrow.write_table(table, fresh("row") + "@8.bagz", encoding="row",
                                          progress=False)),
        ("bagz -> table (row)", "row", lambda: sackli.arrow.read_table(bags("row"))),
        # The conversion a user runs: Parquet read and row write in one call.
        ("parquet file -> bagz (row)", "convrow",
         lambda: sackli.arrow.write_table(parquet, fresh("convrow") + "@8.bagz", progress=False)),
        ("bagz -> 2 columns (row)", "row",
         lambda: sackli.arrow.read_table(bags("row"), columns=two)),
        # Level 3 with zstd's Huffman-coded literals forced, whatever
        # write_table's sample would choose (the default before it chose).
        ("rows -> bagz (row, huffman)", "hufrow",
         lambda: sackli.arrow.write_table(
             table, fresh("hufrow") + "@8.bagz", encoding="row", progress=False,
             options=sackli.Writer.Options(compression=sackli.CompressionZstd(3)))),
        # zstd's fast levels: about 1.4 µs a record instead of about 4 at
        # levels 1-3 for records of ~150 bytes, compressing them as well.
        ("rows -> bagz (row, zstd -1)", "fastrow",
         lambda: sackli.arrow.write_table(
             table, fresh("fastrow") + "@8.bagz", encoding="row", progress=False,
             options=sackli.Writer.Options(compression=sackli.CompressionZstd(-1)))),
        ("bagz -> table (row, zstd -1)", "fastrow",
         lambda: sackli.arrow.read_table(bags("fastrow"))),
        # Uncompressed: the codec's own cost, without zstd's per record.
        ("rows -> bag (row)", "plainrow",
         lambda: sackli.arrow.write_table(table, fresh("plainrow") + "@8.bag",
                                          encoding="row", progress=False)),
        ("bag -> table (row)", "plainrow",
         lambda: sackli.arrow.read_table(os.path.join(folder, "plainrow@*.bag"))),
        ("rows -> bagz (json)", "json",
         lambda: sackli.arrow.write_table(table, fresh("json") + "@8.bagz", encoding="json",
                                          progress=False)),
        ("bagz -> table (json)", "json",
         lambda: sackli.arrow.read_table(bags("json"), decode="json")),
    ]
    if ipc:
        cases += [
            ("rows -> bagz (arrow IPC)", "arrow",
             lambda: sackli.arrow.write_table(table, fresh("arrow") + "@8.bagz",
                                              encoding="arrow", progress=False)),
            ("bagz -> table (arrow IPC)", "arrow",
             lambda: sackli.arrow.read_table(bags("arrow"), decode="arrow")),
        ]
    if wide:
        cases += [
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
            exact = not any(pa.types.is_dictionary(f.type) for f in table.schema)
            if exact and "table (row)" in name:  # (dictionaries are rebuilt)
                assert result.equals(table), name
        results.append({
            "workload": name,
            "seconds": seconds,
            "rows_per_s": rows / seconds,
            "mb_per_s": (nbytes if prefix != "text" else table.column("text").nbytes) / seconds / 1e6,
            "stored_mb": folder_bytes(folder, prefix) / 1e6,
        })
        print(f"  {name:<28} {seconds:8.3f} s", flush=True)
    return {"rows": rows, "table_mb": nbytes / 1e6, "results": results}


# (ratio, workload over, workload under, measure): issue 17's goals and the
# variants beside them.
_RATIOS = [
    ("row write / parquet write", "rows -> bagz (row)", "parquet write", "seconds"),
    ("row read / parquet read", "bagz -> table (row)", "parquet read", "seconds"),
    ("row 2-column read / parquet read", "bagz -> 2 columns (row)", "parquet read", "seconds"),
    ("row size / json .bagz size", "rows -> bagz (row)", "rows -> bagz (json)", "stored_mb"),
    ("row huffman write / parquet write", "rows -> bagz (row, huffman)", "parquet write", "seconds"),
    ("row zstd -1 write / parquet write", "rows -> bagz (row, zstd -1)", "parquet write", "seconds"),
    ("row zstd -1 size / json .bagz size", "rows -> bagz (row, zstd -1)", "rows -> bagz (json)",
     "stored_mb"),
    ("row .bag write / parquet write", "rows -> bag (row)", "parquet write", "seconds"),
    ("row .bag read / parquet read", "bag -> table (row)", "parquet read", "seconds"),
]


def goal_ratios(report: dict[str, Any]) -> dict[str, float]:
    """Issue 17's goals as ratios: row-codec time over Parquet's, row-codec
    size over JSON .bagz's."""
    by_name = {r["workload"]: r for r in report["results"]}
    return {name: by_name[over][measure] / by_name[under][measure]
            for name, over, under, measure in _RATIOS}


def print_table(report: dict[str, Any]) -> None:
    print(f"\n{report['rows']:,} rows, {report['table_mb']:.0f} MB in memory; "
          f"medians of {report['repeat']}")
    print(f"| {'workload':<28} | {'seconds':>8} | {'rows/s':>10} | {'MB/s':>7} | {'stored MB':>9} |")
    print(f"|{'-' * 30}|{'-' * 10}|{'-' * 12}|{'-' * 9}|{'-' * 11}|")
    for r in report["results"]:
        print(f"| {r['workload']:<28} | {r['seconds']:>8.2f} | {r['rows_per_s']:>10,.0f} | "
              f"{r['mb_per_s']:>7.0f} | {r['stored_mb']:>9.1f} |")
    print("\nissue 17 goals (time ratios at most 3, size ratio at most 1.5):")
    for name, ratio in report["ratios"].items():
        print(f"  {name:<36} {ratio:6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", choices=["wide", "mixed"], default="wide",
                        help="wide: ~1 KiB rows (default); mixed: issue 17's 14 narrow columns")
    parser.add_argument("--quick", action="store_true", help="~100 MB instead of ~1 GB")
    parser.add_argument("--rows", type=int,
                        help="rows in the table (default wide 1,000,000, mixed 500,000)")
    parser.add_argument("--ipc", action="store_true",
                        help="also time encoding='arrow' (one IPC message per row: slow, large)")
    parser.add_argument("--repeat", type=int, help="runs per workload (default 3, quick 1)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--dir", help="where to write the files (default: a temporary folder)")
    args = parser.parse_args()
    wide = args.table == "wide"
    rows = args.rows or (100_000 if args.quick else 1_000_000 if wide else 500_000)
    repeat = args.repeat or (1 if args.quick else 3)
    folder = tempfile.mkdtemp(prefix="sackli-arrow-bench-", dir=args.dir)
    try:
        print(f"building {rows:,} rows ({args.table}) in {folder}", flush=True)
        table = make_table(rows) if wide else make_mixed_table(rows)
        report = run(table, repeat, folder, wide, args.ipc)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report.update(table=args.table, ratios=goal_ratios(report), repeat=repeat, machine=f"{platform.machine()}, {os.cpu_count()} cores",
                  python=platform.python_version(), pyarrow=pa.__version__,
                  sackli=sackli.__version__)
    print_table(report)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(report, file, indent=2)


if __name__ == "__main__":
    main()
