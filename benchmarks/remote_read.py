"""Random reads from S3 with network latency: sackli vs. one GET per record.

Starts moto's S3 server on 127.0.0.1 behind the tests' proxy
(tests/remote_servers.py) adding a fixed latency to every request, uploads a
bag, then reads the same random indices

  * with `sackli.Reader.read_indices` (coalesced ranged GETs, up to
    `max_parallelism` in flight), at the default parallelism and at 32;
  * with boto3, one ranged GET per record (given the record offsets for
    free), one at a time and from a pool of 32 threads: the obvious
    hand-written alternative.

Two index sets: "random" (uniform over the bag, so neighbours are often
less than 64 KiB apart and share GETs) and "sparse" (one record in every
128, so every record needs a GET of its own and only parallelism helps);
and "scan", every record in order (sackli only).

The readers above are opened once, so their limits are fetched once. The
"fresh reader" rows open a new reader for every repetition, so they include
what opening and fetching the limits cost: with limits_storage=ON_DISK (the
default) a remote reader fetches the limits pages a read needs, with
IN_MEMORY all the limits at open (what every remote reader did before
ON_DISK meant lazy for remote files).
It prints records/s (median of `--repeat`, implementations alternating) and
the time relative to sackli at 32.

    python benchmarks/remote_read.py                   # 20,000 x 1 KiB, 2,000 reads, 20 ms
    python benchmarks/remote_read.py --quick           # smaller, ~30 s
    python benchmarks/remote_read.py --latency-ms 50 --json out.json
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import platform
import random
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

import boto3
import botocore.config

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # also under PYTHONSAFEPATH
from moto_s3 import serve_s3  # noqa: E402

import sackli  # noqa: E402
from sackli._bulk import record_offsets  # noqa: E402

BUCKET = "sackli-bench"


def make_records(count: int, size: int) -> list[bytes]:
    rng = random.Random(0)
    return [rng.randbytes(size // 2) + b"x" * (size - size // 2) for _ in range(count)]


def per_record_gets(client: Any, key: str, spans: list[tuple[int, int]], threads: int) -> list[bytes]:
    """One ranged GET per record, `threads` at a time."""
    def get(span: tuple[int, int]) -> bytes:
        begin, end = span
        if begin == end:
            return b""
        body = client.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={begin}-{end - 1}")["Body"]
        return body.read()

    if threads == 1:
        return [get(span) for span in spans]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(get, spans))


def fresh_reader_workloads(url: str, read: Callable[[sackli.Reader], list[bytes]]
                           ) -> dict[str, Callable[[], list[bytes]]]:
    """`read` from a reader opened anew each time, for each limits storage."""
    def opened(storage: sackli.LimitsStorage) -> Callable[[], list[bytes]]:
        return lambda: read(sackli.Reader(url, max_parallelism=32, limits_storage=storage))
    return {f"sackli fresh reader, limits_storage={storage.name}, max_parallelism=32": opened(storage)
            for storage in sackli.LimitsStorage}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="5,000 records, 500 reads, 3 repetitions")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--reads", type=int, default=2_000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    if args.quick:
        args.records, args.reads, args.repeat = 5_000, 500, 3

    with serve_s3() as (server, proxy):
        records = make_records(args.records, args.record_size)
        url = f"s3://{BUCKET}/bench.bag"
        client = boto3.client("s3", endpoint_url=server.url)
        client.create_bucket(Bucket=BUCKET)
        with sackli.Writer(url) as writer:
            writer.write_many(records)
        # Offsets for the per-record baseline, read from a local copy.
        with tempfile.TemporaryDirectory() as folder:
            local = os.path.join(folder, "bench.bag")
            client.download_file(BUCKET, "bench.bag", local)
            offsets = list(record_offsets(sackli.Reader(local), 0, 0, args.records))
        rng = random.Random(1)
        index_sets = {
            "random": rng.choices(range(args.records), k=args.reads),
            "sparse": rng.sample(range(0, args.records, 128), k=min(args.reads, args.records // 128)),
            "scan": list(range(args.records)),
        }
        proxy_client = boto3.client("s3", endpoint_url=proxy.url,
                                    config=botocore.config.Config(max_pool_connections=64))
        proxy.latency = args.latency_ms / 1000
        default_parallelism = sackli.Reader.Options().max_parallelism
        readers = {p: sackli.Reader(url, max_parallelism=p) for p in (default_parallelism, 32)}
        results = []
        for set_name, indices in index_sets.items():
            spans = [(offsets[i], offsets[i + 1]) for i in indices]
            expected = [records[i] for i in indices]
            workloads: dict[str, Callable[[], list[bytes]]] = {
                f"sackli read_indices, max_parallelism={default_parallelism}":
                    lambda: readers[default_parallelism].read_indices(indices),
                "sackli read_indices, max_parallelism=32": lambda: readers[32].read_indices(indices),
                **fresh_reader_workloads(url, lambda reader: reader.read_indices(indices)),
            }
            if set_name != "scan":  # a GET per record of the whole bag: too slow to bother
                workloads.update({
                    "boto3, 1 GET per record, 1 thread":
                        lambda: per_record_gets(proxy_client, "bench.bag", spans, 1),
                    "boto3, 1 GET per record, 32 threads":
                        lambda: per_record_gets(proxy_client, "bench.bag", spans, 32),
                })
            times: dict[str, list[float]] = {name: [] for name in workloads}
            gets: dict[str, int] = {}
            downloaded: dict[str, int] = {}
            for _ in range(args.repeat):
                for name, workload in workloads.items():
                    proxy.reset_counts()
                    start = time.perf_counter()
                    result = workload()
                    times[name].append(time.perf_counter() - start)
                    gets[name] = proxy.counts["GET"]
                    downloaded[name] = proxy.bytes_sent["GET"]
                    assert result == expected, name
            reference = statistics.median(times["sackli read_indices, max_parallelism=32"])
            for name, samples in times.items():
                median = statistics.median(samples)
                results.append({"indices": set_name, "reads": len(indices), "workload": name,
                                "seconds": median, "records_per_s": len(indices) / median,
                                "gets": gets[name], "bytes": downloaded[name],
                                "relative_time": median / reference})

    print(f"# random reads of {args.record_size}-byte records from a {args.records:,}-record "
          f".bag on moto S3, {args.latency_ms:g} ms added per request; medians of {args.repeat}; "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, sackli {sackli.__version__}, "
          f"boto3 {boto3.__version__}")
    print("| indices | workload | seconds | records/s | GETs | bytes | time / sackli(32) |")
    print("|---|---|---|---|---|---|---|")
    for row in results:
        print(f"| {row['indices']} ({row['reads']:,}) | {row['workload']} | {row['seconds']:.3f} | "
              f"{row['records_per_s']:,.0f} | {row['gets']:,} | {row['bytes']:,} | "
              f"{row['relative_time']:.1f}x |")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))


if __name__ == "__main__":
    main()
