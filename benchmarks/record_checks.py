"""What checking every record costs (issue 51 §1), in one run: a raw `.bag`
of 1 KiB records written and read with and without its CRC-32C sidecar
(`record_checksums=True`), a `.bagz` with and without zstd's content
checksum (`checksum=`), and bagz 0.3.8 on the same records as the baseline
of each file kind.

Rows: writing the file (`write_many` of every record, then close); a scan
(`read_range` of everything); a shuffled batch (`read_indices` over a
permutation); singles (`r[i]` over random indices). Each is timed
`--repeat` times, the variants interleaved; the table shows medians, the
checked variant's median over the unchecked one's ("overhead", the goal
is at most 1.05 on 1 KiB records) and sackli's over bagz's.

Command (from the repository root):

    python benchmarks/record_checks.py                  # 100,000 records, 5 repeats
    python benchmarks/record_checks.py --records 20000 --repeat 3

Files go to a temporary folder (`--folder`), deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from typing import Callable

import bagz

import sackli

_SIZE = 1024


def _records(count: int, seed: int) -> list[bytes]:
    """1 KiB records, half random, half a phrase (zstd's level 3 halves them)."""
    rng = random.Random(seed)
    phrase = (b"a record of a training set " * 40)[:_SIZE // 2]
    return [rng.randbytes(_SIZE // 2) + phrase for _ in range(count)]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _write_sackli(path: str, records: list[bytes], **options: object) -> None:
    with sackli.Writer(path, **options) as writer:
        writer.write_many(records)


def _write_bagz(path: str, records: list[bytes]) -> None:
    with bagz.Writer(path) as writer:
        for record in records:
            writer.write(record)


def _reads(path: str, order: list[int], singles: list[int], use_bagz: bool) -> dict[str, Callable]:
    if use_bagz:
        reader = bagz.Reader(path)
        return {"scan": lambda: list(reader),
                "shuffled batch": lambda: reader.read_indices(order),
                "singles": lambda: [reader[i] for i in singles]}
    reader = sackli.Reader(path)
    return {"scan": lambda: reader.read_range(0, len(reader)),
            "shuffled batch": lambda: reader.read_indices(order),
            "singles": lambda: [reader[i] for i in singles]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--singles", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--folder", default=None)
    args = parser.parse_args()
    records = _records(args.records, seed=1)
    rng = random.Random(2)
    order = list(range(args.records))
    rng.shuffle(order)
    singles = [rng.randrange(args.records) for _ in range(args.singles)]
    folder = tempfile.mkdtemp(prefix="sackli-checks-", dir=args.folder)
    # (name, file, how to write it, bagz's reader?)
    variants = [
        ("bag: bagz", "bagz.bag", lambda p: _write_bagz(p, records), True),
        ("bag: sackli", "plain.bag", lambda p: _write_sackli(p, records), False),
        ("bag: sackli + sidecar", "checked.bag",
         lambda p: _write_sackli(p, records, record_checksums=True), False),
        ("bagz: bagz", "bagz.bagz", lambda p: _write_bagz(p, records), True),
        ("bagz: sackli, checksum=False", "plain.bagz",
         lambda p: _write_sackli(p, records, checksum=False), False),
        ("bagz: sackli (checksums)", "checked.bagz", lambda p: _write_sackli(p, records), False),
    ]
    times: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(args.repeat):
            for name, file, write, use_bagz in variants:
                path = os.path.join(folder, file)
                times.setdefault((name, "write"), []).append(_timed(lambda: write(path)))
                for row, read in _reads(path, order, singles, use_bagz).items():
                    times.setdefault((name, row), []).append(_timed(read))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    median = {key: statistics.median(values) for key, values in times.items()}
    print(f"{args.records:,} records of {_SIZE} bytes, {args.singles:,} singles, "
          f"medians of {args.repeat}")
    print(f"{'variant':32} {'row':16} {'median s':>10} {'overhead':>9} {'vs bagz':>8}")
    for kind, plain, checked in (("bag", "bag: sackli", "bag: sackli + sidecar"),
                                 ("bagz", "bagz: sackli, checksum=False",
                                  "bagz: sackli (checksums)")):
        for row in ("write", "scan", "shuffled batch", "singles"):
            base = median[(f"{kind}: bagz", row)]
            for name in (f"{kind}: bagz", plain, checked):
                value = median[(name, row)]
                overhead = f"{value / median[(plain, row)]:.3f}" if name == checked else ""
                print(f"{name:32} {row:16} {value:10.4f} {overhead:>9} {value / base:8.2f}")


if __name__ == "__main__":
    main()
