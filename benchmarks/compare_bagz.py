"""sackli vs. bagz on the same data, in the same process, alternating.

Each workload runs for both libraries in turn, `--repeat` times; the table
shows the median time of each and the median of the per-repetition speed
ratios (bagz time / sackli time: above 1 means sackli is faster).

    python benchmarks/compare_bagz.py            # 200,000 x 1 KiB records
    python benchmarks/compare_bagz.py --quick    # 20,000 records, ~30 s
    python benchmarks/compare_bagz.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time
from typing import Any, Callable

import bagz
import numpy as np

import sackli

LIBRARIES = {"sackli": sackli, "bagz": bagz}


def make_records(count: int, size: int, seed: int = 0) -> list[bytes]:
    """Moderately compressible records: random words from a small vocabulary."""
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcdefghijklmnop") for _ in range(rng.randint(2, 9))) for _ in range(512)]
    records = []
    for _ in range(count):
        out = bytearray()
        while len(out) < size:
            out += rng.choice(words) + b" "
        records.append(bytes(out[:size]))
    return records


def write_loop(lib: Any, path: str, records: list[bytes]) -> None:
    with lib.Writer(path) as writer:
        for record in records:
            writer.write(record)


def write_many(lib: Any, path: str, records: list[bytes]) -> None:
    if lib is sackli:
        with sackli.Writer(path) as writer:
            writer.write_many(records)
    else:  # bagz has no write_many: its fastest way is the loop
        write_loop(lib, path, records)


def workloads(path: str, records: list[bytes], indices: list[int]) -> dict[str, Callable[[Any], Any]]:
    array = np.array(indices, dtype=np.int64)
    tmp = path + ".out"

    def random_getitem(lib: Any) -> None:
        reader = lib.Reader(path)
        for i in indices:
            reader[i]

    return {
        "write (write() loop)": lambda lib: write_loop(lib, tmp + lib.__name__ + os.path.splitext(path)[1], records),
        "write (write_many)": lambda lib: write_many(lib, tmp + lib.__name__ + os.path.splitext(path)[1], records),
        "open reader": lambda lib: lib.Reader(path),
        "r[i] random loop": random_getitem,
        "read_indices (list)": lambda lib: lib.Reader(path).read_indices(array if lib is bagz else indices),
        "read_indices (numpy)": lambda lib: lib.Reader(path).read_indices(array),
        "read_indices_iter": lambda lib: sum(1 for _ in lib.Reader(path).read_indices_iter(iter(indices))),
        "iterate all": lambda lib: sum(1 for _ in lib.Reader(path)),
        "read() all": lambda lib: lib.Reader(path).read(),
    }


def measure(fn: Callable[[Any], Any], lib: Any) -> float:
    start = time.perf_counter()
    fn(lib)
    return time.perf_counter() - start


def run(count: int, size: int, repeat: int, suffixes: list[str]) -> list[dict[str, Any]]:
    records = make_records(count, size)
    rng = random.Random(1)
    indices = [rng.randrange(count) for _ in range(min(20_000, count))]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for suffix in suffixes:
            path = os.path.join(folder, "data" + suffix)
            write_loop(bagz, path, records)
            for name, fn in workloads(path, records, indices).items():
                times: dict[str, list[float]] = {lib: [] for lib in LIBRARIES}
                ratios = []
                for _ in range(repeat):
                    for lib_name, lib in LIBRARIES.items():  # alternate
                        times[lib_name].append(measure(fn, lib))
                    ratios.append(times["bagz"][-1] / times["sackli"][-1])
                rows.append({
                    "format": suffix,
                    "workload": name,
                    "sackli_s": statistics.median(times["sackli"]),
                    "bagz_s": statistics.median(times["bagz"]),
                    "speedup": statistics.median(ratios),
                })
                print(f"{suffix:6} {name:24} sackli {rows[-1]['sackli_s'] * 1e3:9.2f} ms   "
                      f"bagz {rows[-1]['bagz_s'] * 1e3:9.2f} ms   x{rows[-1]['speedup']:.2f}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20,000 records, 3 repetitions")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    count, repeat = (20_000, 3) if args.quick else (args.records, args.repeat)
    print(f"{count:,} records of {args.record_size} bytes, {repeat} repetitions, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, "
          f"sackli {sackli.__version__}, bagz (PyPI wheel)")
    rows = run(count, args.record_size, repeat, [".bag", ".bagz"])
    print("\n| format | workload | sackli (median) | bagz (median) | speed-up |\n|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['format']} | {row['workload']} | {row['sackli_s'] * 1e3:.1f} ms | "
              f"{row['bagz_s'] * 1e3:.1f} ms | {row['speedup']:.2f}x |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"records": count, "record_size": args.record_size, "repeat": repeat, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
