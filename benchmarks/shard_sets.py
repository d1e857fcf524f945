"""sackli vs. bagz on sets of many tiny shards (issue 49 §4).

For each set size (default 1,000, 10,000 and 99,999 shards of one record
each, `.bag`, written directly as bytes), every repetition starts one fresh
process per implementation (alternating which goes first), so each open is
the first of its process (the files' inodes are in the kernel's cache, as
after any earlier listing). Each process times:

  open+len     Reader("x@N.bag") and len(): opens every shard
  first reads  r[i] for every shard i, in order: the first read of each
  batch        one read_indices of every 7th record, across the shards

The table gives each implementation's median seconds and "bagz/sackli",
bagz's median over sackli's (above 1: sackli is faster); first reads also
per shard in microseconds. A process that dies (bagz maps every shard, and
aborts when vm.max_map_count runs out) is reported as such, with its exit
code.

Commands (from the repository root):

    python benchmarks/shard_sets.py                    # 1,000 / 10,000 / 99,999 shards, 5 repetitions
    python benchmarks/shard_sets.py --shards 20,50 --repeat 1 --json out.json   # the harness test's run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

WORKLOADS = ("open+len", "first reads", "batch")
IMPLEMENTATIONS = ("sackli", "bagz")


def record(i: int) -> bytes:
    return b"r%d" % i


def write_set(folder: str, count: int) -> str:
    """Writes `count` one-record shards; returns the set's spec."""
    os.makedirs(folder, exist_ok=True)
    for i in range(count):
        payload = record(i)
        fd = os.open(os.path.join(folder, f"x-{i:05d}-of-{count:05d}.bag"),
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, payload + struct.pack("<Q", len(payload)))
        finally:
            os.close(fd)
    return os.path.join(folder, f"x@{count}.bag")


def worker(implementation: str, spec: str, count: int) -> dict[str, float]:
    """One process's timings, checked against the records written."""
    module = __import__(implementation)
    start = time.perf_counter()
    reader = module.Reader(spec)
    if len(reader) != count:
        raise AssertionError(f"{implementation}: {len(reader)} records, expected {count}")
    opened = time.perf_counter()
    firsts = [reader[i] for i in range(count)]
    read = time.perf_counter()
    picks = list(range(0, count, 7))
    batch = reader.read_indices(picks)
    done = time.perf_counter()
    if firsts != [record(i) for i in range(count)] or batch != [record(i) for i in picks]:
        raise AssertionError(f"{implementation}: wrong records")
    return {"open+len": opened - start, "first reads": read - opened, "batch": done - read}


def run_worker(implementation: str, spec: str, count: int) -> dict[str, float] | str:
    """The timings of one fresh process, or why it failed."""
    done = subprocess.run(
        [sys.executable, "-P", os.path.abspath(__file__), "--worker", implementation, spec, str(count)],
        capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        return f"died (exit {done.returncode}): {last[:100]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(counts: list[int], repeat: int, folder: str) -> list[dict]:
    rows = []
    for count in counts:
        spec = write_set(os.path.join(folder, str(count)), count)
        times: dict[str, dict[str, list[float]]] = {i: {w: [] for w in WORKLOADS} for i in IMPLEMENTATIONS}
        failures: dict[str, str] = {}
        for rep in range(repeat):
            order = IMPLEMENTATIONS if rep % 2 == 0 else IMPLEMENTATIONS[::-1]
            for implementation in order:
                if implementation in failures:
                    continue
                result = run_worker(implementation, spec, count)
                if isinstance(result, str):
                    failures[implementation] = result
                    continue
                for workload in WORKLOADS:
                    times[implementation][workload].append(result[workload])
        shutil.rmtree(os.path.join(folder, str(count)), ignore_errors=True)
        for workload in WORKLOADS:
            row = {"shards": count, "workload": workload}
            for implementation in IMPLEMENTATIONS:
                samples = times[implementation][workload]
                row[implementation] = statistics.median(samples) if samples else None
                row[implementation + " note"] = failures.get(implementation, "")
            rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| shards | workload | sackli s | bagz s | bagz/sackli | sackli µs/shard | bagz µs/shard |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        sackli, bagz = row["sackli"], row["bagz"]

        def seconds(value, note):
            return f"{value:.5f}" if value is not None else note.split(":")[0]

        def per_shard(value):
            return f"{value / row['shards'] * 1e6:.2f}" if value is not None and row["workload"] == "first reads" else ""

        ratio = f"{bagz / sackli:.2f}" if sackli and bagz else "-"
        lines.append(f"| {row['shards']:,} | {row['workload']} | {seconds(sackli, row['sackli note'])} | "
                     f"{seconds(bagz, row['bagz note'])} | {ratio} | {per_shard(sackli)} | {per_shard(bagz)} |")
    notes = {(row["shards"], name, row[name + " note"]) for row in rows for name in IMPLEMENTATIONS
             if row[name + " note"]}
    lines += [f"# {name} at {shards:,} shards: {note}" for shards, name, note in sorted(notes)]
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", default="1000,10000,99999", help="comma-separated set sizes (at most 99999)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--folder", help="where to write the sets (default: a temporary folder)")
    args = parser.parse_args()
    counts = [int(c) for c in args.shards.split(",")]
    if any(not 1 <= c <= 99_999 for c in counts):
        parser.error("set sizes must be in 1..99999")
    header = [f"# machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
              f"# command: python benchmarks/shard_sets.py {' '.join(sys.argv[1:])}".rstrip()]
    folder = args.folder or tempfile.mkdtemp(prefix="sackli-shard-sets-")
    try:
        rows = measure(counts, args.repeat, folder)
    finally:
        if not args.folder:
            shutil.rmtree(folder, ignore_errors=True)
    print("\n".join(header))
    print(table(rows))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"header": header, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
