"""sackli.datasets vs. danijar's `bags` 0.5.1 on the same dataset, in the
same process.

Data: N datapoints of a 4 KiB "image" (`bytes`), an `int(8)` label and a
`utf8[]` list of 0-20 words, deterministic. Each library writes its own copy
(one shard folder), then reads its own copy; the two copies are byte-identical
(checked). Every workload runs `--repeat` times per library, alternating
which goes first, page cache warm; the table shows each median time and
"bags/sackli", bags' median over sackli's (above 1: sackli is faster).

Workloads:
  write          N datapoints with `ShardedDatasetWriter.append` (bags'
                 default `flush=True`, as its README writes them).
  random         R datapoints at random indices, `r[i]`, one at a time.
  label only     the same indices, `r[i, {"label": True}]`.
  words[2:5]     the same indices, `r[i, {"words": range(2, 5)}]`.
  batch 1000     B batches of 1,000 random indices: sackli's
                 `r.read_indices(batch)` vs. a bags loop of `r[i]`.
  full scan      every datapoint in order: `for d in r` vs. bags' loop.

Commands (from the repository root):

    python benchmarks/datasets_bags.py --quick     # 10,000 datapoints, 3 repetitions
    python benchmarks/datasets_bags.py             # 100,000 datapoints, 5 repetitions
"""

from __future__ import annotations

import argparse
import filecmp
import gc
import mmap
import os
import platform
import random
import shutil
import statistics
import tempfile
import time
from typing import Any, Callable

import bags
import bags.formats

import sackli
from sackli import datasets

SPEC = {"image": "bytes", "label": "int(8)", "words": "utf8[]"}
IMAGE_BYTES = 4096
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota"]
BATCH = 1000


def make_datapoints(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [{
        "image": rng.randbytes(IMAGE_BYTES),
        "label": rng.randrange(1 << 40),
        "words": [rng.choice(WORDS) for _ in range(rng.randrange(21))],
    } for _ in range(n)]


# --- One adapter per library, so the workloads call the same code ----------


class Sackli:
    name = "sackli"

    @staticmethod
    def write(directory: str, datapoints: list[dict[str, Any]]) -> None:
        with datasets.ShardedDatasetWriter(directory, SPEC) as writer:
            for datapoint in datapoints:
                writer.append(datapoint)

    @staticmethod
    def open(directory: str) -> Any:
        return datasets.DatasetReader(os.path.join(directory, "000000"))

    @staticmethod
    def batch(reader: Any, indices: list[int]) -> list[Any]:
        return reader.read_indices(indices)

    @staticmethod
    def scan(reader: Any) -> int:
        return sum(1 for _ in reader)


class Bags:
    name = "bags"

    @staticmethod
    def write(directory: str, datapoints: list[dict[str, Any]]) -> None:
        with bags.ShardedDatasetWriter(directory, SPEC, bags.formats.encoders) as writer:
            for datapoint in datapoints:
                writer.append(datapoint)

    @staticmethod
    def open(directory: str) -> Any:
        # bags' ShardedDatasetReader takes no masks: read the shard folder.
        return bags.DatasetReader(os.path.join(directory, "000000"), bags.formats.decoders)

    @staticmethod
    def batch(reader: Any, indices: list[int]) -> list[Any]:
        return [reader[i] for i in indices]

    @staticmethod
    def scan(reader: Any) -> int:
        return sum(1 for i in range(len(reader)) if reader[i] is not None)


LIBRARIES = [Sackli, Bags]


# --- Workloads: a function of (library, its reader) -> anything ------------


def _random(indices: list[int], mask: Any) -> Callable[[Any, Any], Any]:
    if mask is None:
        return lambda lib, reader: [reader[i] for i in indices]
    return lambda lib, reader: [reader[i, mask] for i in indices]


def _batches(batches: list[list[int]]) -> Callable[[Any, Any], Any]:
    return lambda lib, reader: [lib.batch(reader, batch) for batch in batches]


def batch_indices(n: int, batches: int, seed: int = 2) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(n) for _ in range(BATCH)] for _ in range(batches)]


def read_workloads(n: int, reads: int, batches: int, seed: int = 1) -> dict[str, Any]:
    rng = random.Random(seed)
    indices = [rng.randrange(n) for _ in range(reads)]
    return {
        f"random ({reads:,} r[i])": _random(indices, None),
        f"label only ({reads:,})": _random(indices, {"label": True}),
        f"words[2:5] ({reads:,})": _random(indices, {"words": range(2, 5)}),
        f"batch {BATCH:,} ({batches} batches)": _batches(batch_indices(n, batches)),
        f"full scan ({n:,})": lambda lib, reader: lib.scan(reader),
    }


def timed(call: Callable[[], Any]) -> float:
    gc.collect()
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure_writes(root: str, datapoints: list[Any], repeat: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {lib.name: [] for lib in LIBRARIES}
    for rep in range(repeat):
        order = LIBRARIES if rep % 2 == 0 else LIBRARIES[::-1]
        for lib in order:
            directory = os.path.join(root, f"{lib.name}-write")
            shutil.rmtree(directory, ignore_errors=True)
            times[lib.name].append(timed(lambda: lib.write(directory, datapoints)))
    return times


def check_identical(root: str) -> None:
    """The two libraries wrote the same bytes (else the comparison is moot)."""
    a, b = (os.path.join(root, f"{lib.name}-write", "000000") for lib in LIBRARIES)
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b)), (names, os.listdir(b))
    _, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
    assert not mismatch and not errors, (mismatch, errors)


def measure_reads(root: str, workloads: dict[str, Any], repeat: int) -> dict[str, dict[str, list[float]]]:
    readers = {lib.name: lib.open(os.path.join(root, f"{lib.name}-write")) for lib in LIBRARIES}
    results: dict[str, dict[str, list[float]]] = {}
    for label, workload in workloads.items():
        times: dict[str, list[float]] = {lib.name: [] for lib in LIBRARIES}
        for rep in range(repeat):
            order = LIBRARIES if rep % 2 == 0 else LIBRARIES[::-1]
            for lib in order:
                reader = readers[lib.name]
                times[lib.name].append(timed(lambda: workload(lib, reader)))
        results[label] = times
    for reader in readers.values():
        reader.close()
    return results


def copy_floor(root: str, batches: list[list[int]], repeat: int) -> float:
    """Median seconds to only copy the batches' images out of the page cache
    into bytes objects (mmap slices of the uncompressed `image.bag`, whose
    records all have IMAGE_BYTES): a bound on any batch read that returns
    the images as bytes, whatever the library."""
    path = os.path.join(root, "sackli-write", "000000", "image.bag")
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        offsets = [[i * IMAGE_BYTES for i in batch] for batch in batches]

        def copy() -> list[list[bytes]]:  # kept, as the workloads keep their batches
            return [[data[o:o + IMAGE_BYTES] for o in batch] for batch in offsets]

        return statistics.median(timed(copy) for _ in range(repeat))


def print_table(results: dict[str, dict[str, list[float]]], goals: dict[str, float]) -> None:
    print(f"{'workload':<28} {'sackli':>10} {'bags':>10} {'bags/sackli':>12} {'goal':>6}")
    for label, times in results.items():
        ours = statistics.median(times["sackli"])
        theirs = statistics.median(times["bags"])
        goal = goals.get(label, 3.0)
        mark = "" if theirs / ours >= goal else "  (below goal)"
        print(f"{label:<28} {ours * 1e3:>8.1f}ms {theirs * 1e3:>8.1f}ms {theirs / ours:>11.1f}x "
              f"{goal:>5.1f}x{mark}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 datapoints, 3 repetitions")
    parser.add_argument("--datapoints", type=int, help="default 100,000 (10,000 with --quick)")
    parser.add_argument("--repeat", type=int, help="default 5 (3 with --quick)")
    parser.add_argument("--dir", help="where to write (default: a temporary folder, deleted)")
    args = parser.parse_args()
    n = args.datapoints or (10_000 if args.quick else 100_000)
    repeat = args.repeat or (3 if args.quick else 5)
    reads, batches = min(n, 10_000), 10
    print(f"Python {platform.python_version()}, {os.cpu_count()} cores, sackli "
          f"{sackli.__version__}, bags {getattr(bags, '__version__', '0.5.1')}; "
          f"{n:,} datapoints, {repeat} repetitions, medians")
    datapoints = make_datapoints(n)
    root = tempfile.mkdtemp(prefix="sackli-datasets-bench-", dir=args.dir)
    try:
        write_label = f"write ({n:,})"
        results = {write_label: measure_writes(root, datapoints, repeat)}
        check_identical(root)
        del datapoints
        results.update(measure_reads(root, read_workloads(n, reads, batches), repeat))
        batch_label = f"batch {BATCH:,} ({batches} batches)"
        print_table(results, {write_label: 1.5, batch_label: 20.0})
        floor = copy_floor(root, batch_indices(n, batches), repeat)
        bags_batch = statistics.median(results[batch_label]["bags"])
        print(f"\nCopying only the images of those batches out of the page cache (mmap slices, "
              f"no library): {floor * 1e3:.1f}ms, so no batch read returning them as bytes can "
              f"beat bags' loop by more than {bags_batch / floor:.1f}x here.")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
