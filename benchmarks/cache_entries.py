"""What the engine's reader of read-cache entries (`sackli._engine.BlockCache`,
native/bagz/block_cache.h) costs per read, without a network: the part of a
warm remote read that the entry format decides.

Writes `--entries` entries of 1 MiB (as sackli's read cache does: the
build's own `encode_header`, then the payload) into a temporary folder, and
times, per read (median of `--repeat` rounds):

  * open hit: a 1 KiB read of an entry the cache keeps open (what a record
    of a bag whose blocks fit in the open set costs);
  * reopen: a 1 KiB read of an entry it must open and check first (the
    open set is one entry, and reads cycle through all of them: what a
    random record of a bag far larger than the open set costs: open,
    fstat, the header's read and check, the chunk's);
  * whole block: a read of a whole 1 MiB entry that is open (an epoch's
    large reads: every chunk's CRC).

Run it with each build to compare (e.g. before and after a change of the
entry format), in the same run of the machine:

    python benchmarks/cache_entries.py
    PYTHONPATH=/path/to/other/build python benchmarks/cache_entries.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import tempfile
import time

from sackli import _engine

BLOCK = 1 << 20


def make_cache(root: str, max_open: int) -> object:
    """A BlockCache of this build (sealed entries take a secret)."""
    if hasattr(_engine.BlockCache, "SECRET_BYTES"):
        return _engine.BlockCache(root, b"\x01" * 16, max_open, 3600.0)
    return _engine.BlockCache(root, max_open, 3600.0)


def write_entries(cache: object, count: int) -> list[bytes]:
    """`count` entries of one block each; their keys."""
    payload = os.urandom(BLOCK)
    keys = []
    for number in range(count):
        key = hashlib.sha256(b"object %d" % number).digest()
        path = cache.entry_path(key, 0)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as file:
            file.write(cache.encode_header(key, 0, payload) + payload)
        keys.append(key)
    return keys


def per_read(cache: object, keys: list[bytes], reads: int, lo: int, hi: int) -> float:
    """Microseconds per read of [lo, hi) of the entries, in turn."""
    start = time.perf_counter()
    for number in range(reads):
        key = keys[number % len(keys)]
        # 997: reads land on different chunks
        offset = (number * 997 * 1024) % (BLOCK - hi) if hi < BLOCK else 0
        if cache.read(key, 0, BLOCK, lo + offset, hi + offset) is None:
            raise AssertionError("a miss: the entries were not written as this build reads them")
    return (time.perf_counter() - start) / reads * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=64)
    parser.add_argument("--reads", type=int, default=20000, help="per round (small reads)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    sealed = hasattr(_engine.BlockCache, "SECRET_BYTES")
    with tempfile.TemporaryDirectory() as folder:
        root = os.path.join(folder, "v1")
        keys = write_entries(make_cache(root, 1), args.entries)
        kept = make_cache(root, args.entries)  # every entry stays open
        one = make_cache(root, 1)  # every read reopens
        cases = {
            "open hit, 1 KiB": lambda: per_read(kept, keys, args.reads, 100, 1124),
            "reopen, 1 KiB": lambda: per_read(one, keys, args.reads // 4, 100, 1124),
            "whole block, open": lambda: per_read(kept, keys, max(args.reads // 200, 64), 0,
                                                  BLOCK),
        }
        per_read(kept, keys, len(keys), 0, 1)  # opened once
        results = {name: statistics.median(run() for _ in range(args.repeat))
                   for name, run in cases.items()}
    print(f"# entry format {_engine.BlockCache.FORMAT} ({'sealed' if sealed else 'CRC-32C header'})"
          f", {args.entries} entries of 1 MiB, median of {args.repeat} rounds")
    print(f"{'case':<20} {'us/read':>10}")
    for name, micros in results.items():
        print(f"{name:<20} {micros:>10.2f}")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"format": _engine.BlockCache.FORMAT, "results": results}, file, indent=1)


if __name__ == "__main__":
    main()
