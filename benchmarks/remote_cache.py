"""Training epochs over a bag on S3: with sackli's local read cache, without
it, and from a local copy.

Writes a sharded `.bagz` (zstd records) to a local folder, uploads the same
shards to moto's S3 server, and puts the tests' proxy (tests/remote_servers.py,
through moto_s3.py) in front of the server, adding `--latency-ms` to every
request and counting requests and response bytes. An epoch reads every record
in the order `sackli.shard_indices(n, epoch=e)` gives, checking a CRC-32 of
the records in that order against the local copy's. Cases:

  * local copy: the shards on local disk (median of 3 epochs);
  * S3, no cache: epoch 1 (opening the Reader included), epoch 2 (same Reader);
  * S3, cache (`cache_dir=`, `cache_max_bytes=`): epoch 1 with an empty cache
    folder (cold), epoch 2 with the same Reader (warm), and epoch 3 with a new
    Reader on the same folder (warm cache, as a new process would open it:
    about one request per object, nothing else).

Singles (`--singles`, default 1,000): random `reader[i]`, one at a time,
from the local copy and from the warm cache (the Reader of epoch 2), each
checked against the local copy's record; the table gives microseconds per
record (median of the rounds) and the time relative to the local copy.
`--cache-only` leaves out the rows without a cache (they take most of the
run) for comparing cache builds.

The cache cases run only when the installed sackli's Reader accepts
`cache_dir`; otherwise the script says "cache: not available in this sackli"
and prints the other rows.

An epoch reads through `reader.read_indices_iter(order)` by default: what a
training loop does with `shard_indices` (docs/loaders.md), and its background
read-ahead plans ~`read_ahead_bytes` of records at a time, so neighbouring
records share GETs. `--batch-size N` reads with `reader.read_indices` in
batches of N instead (fewer records per plan: more, smaller GETs).

The table gives seconds per epoch (median of `--repeat` rounds), records/s,
requests and MB through the proxy, and the time relative to the local copy
and to no cache (epoch 2 against no cache's epoch 2; a newly opened Reader
against no cache's epoch 1, which also opens one).

The bag is split into `--shards` objects because moto's server copies a whole
object for every ranged GET (one 40 MB object made each epoch 8x slower). On
two cores the proxy and moto together answer ~250-300 requests/s, which is
what bounds an epoch without a cache (about one GET per 4-5 records of 1-4
KiB, per record of 4-12 KiB), however many requests are in flight.

    python benchmarks/remote_cache.py --quick          # 10,000 records of 1-4 KiB (~20 MB), ~1 min
    python benchmarks/remote_cache.py                  # 20,000 records of 4-12 KiB (~120 MB), ~3-5 min
    python benchmarks/remote_cache.py --quick --cache-only   # the cache rows and singles, ~20 s
    python benchmarks/remote_cache.py --latency-ms 50 --batch-size 256 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from typing import Any, Callable

import boto3

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # also under PYTHONSAFEPATH
from moto_s3 import serve_s3  # noqa: E402

import sackli  # noqa: E402

BUCKET = "sackli-bench-cache"
NAME = "epochs@{}.bagz"
NOT_AVAILABLE = "cache: not available in this sackli"


def make_records(count: int, low: int, high: int, seed: int = 0) -> list[bytes]:
    """`count` records of `low`..`high` bytes: three quarters random bytes,
    one quarter a repeated byte, so zstd stores them in ~0.75 of their size."""
    rng = random.Random(seed)
    records = []
    for _ in range(count):
        size = rng.randint(low, high)
        noise = size * 3 // 4
        records.append(rng.randbytes(noise) + bytes([size % 251]) * (size - noise))
    return records


def read_epoch(reader: sackli.Reader, order: Any, batch_size: int) -> int:
    """Reads the records of `order` and returns their CRC-32 in that order."""
    crc = 0
    if batch_size:
        for start in range(0, len(order), batch_size):
            for record in reader.read_indices(order[start:start + batch_size]):
                crc = zlib.crc32(record, crc)
    else:
        for record in reader.read_indices_iter(order):
            crc = zlib.crc32(record, crc)
    return crc


def open_cached(url: str, cache_dir: str, cache_max_bytes: int, parallelism: int) -> sackli.Reader | None:
    """A Reader of `url` with the local read cache, or None when this sackli
    has no such option (a Reader refuses unknown options with TypeError
    before any I/O)."""
    try:
        return sackli.Reader(url, max_parallelism=parallelism, cache_dir=cache_dir,
                             cache_max_bytes=cache_max_bytes)
    except TypeError as error:
        if "cache_dir" in str(error) or "cache_max_bytes" in str(error):
            return None
        raise


def time_singles(reader: sackli.Reader, indices: list[int], local: sackli.Reader) -> float:
    """Seconds per record of `reader[i]` over `indices`, one at a time (the
    records checked against `local`'s afterwards, outside the timing)."""
    start = time.perf_counter()
    got = [reader[i] for i in indices]
    seconds = (time.perf_counter() - start) / len(indices)
    if got != [local[i] for i in indices]:
        raise AssertionError("singles: records differ from the local copy's")
    return seconds


class Epochs:
    """Times epochs and keeps, per case, the samples and the proxy's counts."""

    def __init__(self, proxy: Any, orders: list[Any], expected: list[int], batch_size: int) -> None:
        self.proxy, self.orders, self.expected, self.batch_size = proxy, orders, expected, batch_size
        self.samples: dict[str, list[dict[str, float]]] = {}
        self.opened: list[sackli.Reader] = []

    def run(self, case: str, epoch: int, open_reader: Callable[[], sackli.Reader | None] | None = None,
            reader: sackli.Reader | None = None) -> sackli.Reader | None:
        """Epoch `epoch` (1-based) of `reader`, or of the Reader `open_reader`
        returns (opening timed); returns the Reader (None if `open_reader`
        gave None)."""
        self.proxy.reset_counts()
        start = time.perf_counter()
        if reader is None:
            reader = open_reader()
            if reader is None:
                return None
            self.opened.append(reader)
        crc = read_epoch(reader, self.orders[epoch - 1], self.batch_size)
        seconds = time.perf_counter() - start
        if crc != self.expected[epoch - 1]:
            raise AssertionError(f"{case}, epoch {epoch}: records differ from the local copy's")
        counts, sent = self.proxy.counts, self.proxy.bytes_sent
        self.samples.setdefault(f"{case}|{epoch}", []).append({
            "seconds": seconds, "requests": sum(counts.values()), "gets": counts["GET"],
            "heads": counts["HEAD"], "bytes": sum(sent.values())})
        return reader

    def close(self) -> None:
        """Closes the Readers `run` opened (before their folders go)."""
        for reader in self.opened:
            reader.close()
        self.opened.clear()

    def median(self, key: str) -> dict[str, float]:
        samples = self.samples[key]
        return {field: statistics.median(s[field] for s in samples) for field in samples[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="10,000 records of 1-4 KiB, 3 rounds (unless given below)")
    parser.add_argument("--records", type=int, help="default 20,000 (--quick: 10,000)")
    parser.add_argument("--min-size", type=int, help="smallest record, bytes: default 4,096 (--quick: 1,024)")
    parser.add_argument("--max-size", type=int, help="largest record, bytes: default 12,288 (--quick: 4,096)")
    parser.add_argument("--shards", type=int, default=32, help="objects in the bucket")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="added to every request")
    parser.add_argument("--parallelism", type=int, default=32, help="max_parallelism of the S3 Readers")
    parser.add_argument("--batch-size", type=int, default=0,
                        help="read_indices in batches of N (default 0: read_indices_iter)")
    parser.add_argument("--cache-max-bytes", type=int, default=2 << 30,
                        help="cache_max_bytes of the cache cases (default 2 GiB: the whole bag)")
    parser.add_argument("--repeat", type=int, help="rounds of the S3 cases (medians): default 1 (--quick: 3)")
    parser.add_argument("--singles", type=int, default=1000,
                        help="random reader[i] per round, local and warm cache (0: none)")
    parser.add_argument("--cache-only", action="store_true", help="leave out the rows without a cache")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    defaults = (dict(records=10_000, min_size=1024, max_size=4096, repeat=3) if args.quick
                else dict(records=20_000, min_size=4096, max_size=12288, repeat=1))
    for option, value in defaults.items():
        if getattr(args, option) is None:
            setattr(args, option, value)

    name = NAME.format(args.shards)
    records = make_records(args.records, args.min_size, args.max_size)
    orders = [sackli.shard_indices(args.records, epoch=e, seed=0) for e in range(3)]
    with tempfile.TemporaryDirectory(prefix="sackli-bench-cache-") as folder, serve_s3() as (server, proxy):
        local_spec = os.path.join(folder, "local", name)
        os.makedirs(os.path.dirname(local_spec))
        with sackli.ShardedWriter(local_spec, num_records=len(records)) as writer:
            writer.write_many(records)
        del records
        # The same bytes in the bucket, uploaded around the proxy (not counted).
        client = boto3.client("s3", endpoint_url=server.url)
        client.create_bucket(Bucket=BUCKET)
        stored = 0
        for path in sorted(pathlib.Path(local_spec).parent.iterdir()):
            client.upload_file(str(path), BUCKET, path.name)
            stored += path.stat().st_size
        url = f"s3://{BUCKET}/{name}"

        # The local copy gives each order's checksum, then its times.
        with sackli.Reader(local_spec) as local:
            expected = [read_epoch(local, order, args.batch_size) for order in orders]
        epochs = Epochs(proxy, orders, expected, args.batch_size)
        for epoch in (1, 2, 3):
            epochs.run("local copy", epoch, lambda: sackli.Reader(local_spec))
        local_times = [sample["seconds"] for epoch in (1, 2, 3)
                       for sample in epochs.samples[f"local copy|{epoch}"]]
        singles_order = random.Random(5).choices(range(args.records), k=args.singles)
        singles: dict[str, list[float]] = {"local copy": [], "S3, warm cache": []}
        local_reader = sackli.Reader(local_spec)
        if args.singles:
            for _ in range(3):
                singles["local copy"].append(time_singles(local_reader, singles_order, local_reader))

        proxy.latency = args.latency_ms / 1000
        cache_available = True
        for round_number in range(args.repeat):
            if not args.cache_only:
                reader = epochs.run("S3, no cache", 1,
                                    lambda: sackli.Reader(url, max_parallelism=args.parallelism))
                epochs.run("S3, no cache", 2, reader=reader)
            if not cache_available:
                continue
            cache_dir = os.path.join(folder, f"cache-{round_number}")
            os.makedirs(cache_dir)

            def opened() -> sackli.Reader | None:
                return open_cached(url, cache_dir, args.cache_max_bytes, args.parallelism)

            reader = epochs.run("S3, cache", 1, opened)
            if reader is None:
                cache_available = False
                continue
            epochs.run("S3, cache", 2, reader=reader)
            if args.singles:
                proxy.reset_counts()
                singles["S3, warm cache"].append(time_singles(reader, singles_order, local_reader))
                if proxy.counts["GET"]:
                    raise AssertionError("singles from a warm cache sent GETs")
            epochs.run("S3, cache, new Reader", 3, opened)
            epochs.close()
            shutil.rmtree(cache_dir)
        epochs.close()
        local_reader.close()

    local_seconds = statistics.median(local_times)
    results = []
    for key in epochs.samples:
        case, epoch = key.split("|")
        row = {"case": case, "epoch": int(epoch), **epochs.median(key)}
        row["records_per_s"] = args.records / row["seconds"]
        row["relative_to_local"] = row["seconds"] / local_seconds
        if case == "local copy":
            if epoch != "1":
                continue
            row.update(epoch=None, seconds=local_seconds, records_per_s=args.records / local_seconds,
                       relative_to_local=1.0)
        if case.startswith("S3, cache") and not args.cache_only:
            # Like with like: a new Reader against no cache's epoch 1, which also opens one.
            reference = epochs.median(f"S3, no cache|{2 if epoch == '2' else 1}")["seconds"]
            row["relative_to_no_cache"] = row["seconds"] / reference
        results.append(row)
    single_rows = []
    if args.singles and singles["S3, warm cache"]:
        local_single = statistics.median(singles["local copy"])
        for case, samples in singles.items():
            seconds = statistics.median(samples)
            single_rows.append({"case": case, "microseconds": seconds * 1e6,
                                "relative_to_local": seconds / local_single})

    read = f"read_indices in batches of {args.batch_size}" if args.batch_size else "read_indices_iter"
    print(f"# epochs of {args.records:,} shuffled records ({args.min_size:,}-{args.max_size:,} bytes, "
          f"zstd) from {args.shards} shards ({stored / 1e6:.1f} MB stored) through {read}; "
          f"moto S3 with {args.latency_ms:g} ms added per request, max_parallelism={args.parallelism}; "
          f"medians of {args.repeat} (local copy: of 3); {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, sackli {sackli.__version__}")
    if not cache_available:
        print(NOT_AVAILABLE)
    print("| case | epoch | seconds | records/s | requests | GETs | MB fetched | time / local | time / no cache |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in results:
        epoch = "each" if row["epoch"] is None else row["epoch"]
        versus = f"{row['relative_to_no_cache']:.2f}x" if "relative_to_no_cache" in row else ""
        print(f"| {row['case']} | {epoch} | {row['seconds']:.3f} | {row['records_per_s']:,.0f} | "
              f"{row['requests']:,.0f} | {row['gets']:,.0f} | {row['bytes'] / 1e6:,.1f} | "
              f"{row['relative_to_local']:.1f}x | {versus} |")
    if single_rows:
        print(f"\n# {args.singles:,} random reader[i], one at a time (median of "
              f"{len(singles['S3, warm cache'])} rounds; local copy: of 3)")
        print("| case | µs per record | time / local |")
        print("|---|---|---|")
        for row in single_rows:
            print(f"| {row['case']} | {row['microseconds']:.1f} | {row['relative_to_local']:.1f}x |")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {"args": vars(args), "stored_bytes": stored, "cache_available": cache_available,
             "results": results, "singles": single_rows}, indent=2))


if __name__ == "__main__":
    main()
