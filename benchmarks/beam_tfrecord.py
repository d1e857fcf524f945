"""Beam pipelines on the DirectRunner: sackli.beam vs. Beam's TFRecord connectors.

The same records (deterministic, generated inside each write pipeline by the
same function) go through four pairs of pipelines; within each repetition the
two implementations of a workload run one after the other, in alternating
order, and the files written by the repetition's write pipelines are what its
read pipelines read:

  write .bag   Create(chunks) | FlatMap(records) | WriteToSackli("bag/out@8.bag")
      vs.                                        | WriteToTFRecord(num_shards=8)
  write .bagz  ... | WriteToSackli("bagz/out@8.bagz")            (zstd level 3)
      vs.      ... | WriteToTFRecord(compression_type=ZSTD, num_shards=8)
                                               (zstandard's default, level 3)
  read .bag    ReadFromSackli("bag/out@*.bag") | Count.Globally() | assert_that
      vs.      ReadFromTFRecord("tfrecord/out-*.tfrecord") | ...
  read .bagz   ReadFromSackli("bagz/out@*.bagz") | ...
      vs.      ReadFromTFRecord("tfrecord_zstd/out-*.tfrecord.zst", ZSTD) | ...

  batched .bag ReadFromSackliBatched("bag/out@*.bag") | Map(num_rows) | sum
      vs.      ReadFromParquetBatched("parquet/out-*.parquet") | Map(num_rows) | sum
  raw lists    ReadFromSackliBatched(..., decode="raw") | Map(len) | sum
      vs.      the same Parquet read

The Parquet files hold the same records as one `binary` column (8 files,
pyarrow's default row groups, no compression), written outside the timings
after the first repetition's writes; each Parquet row group is one Beam
element, as each sackli batch (about 8 MiB of records) is.
Uncompressed TFRecord is compared with `.bag`, zstd-compressed TFRecord with
`.bagz`. Both sinks shard the same way: with `--shards N` (default 8) Beam's
WriteImpl groups the records by shard key (a GroupByKey of all the data), so
each write pays the generator and that shuffle too, and the shuffle dominates;
`--shards 0` lets the runner decide (no shuffle: one shard per bundle, a
single shard on the in-memory DirectRunner). The "generate only" row
(Create | FlatMap | Count) is the floor under both writes.
Each record is `--record-bytes` long: a 16-byte global index, then half
seeded random bytes, then a short phrase of text repeated: zstd keeps ~58%
of it compressing records one by one (`.bagz`), ~52% as one stream
(TFRecord's ZSTD).
After the first repetition's writes, every file set is read back outside the
timings and checked to hold exactly the generated records.

Times are wall-clock seconds of `Pipeline.run().wait_until_finish()`,
including pipeline start-up; MB/s is record payload (records x record bytes)
per second, not stored bytes. Reads hit the page cache (the files were just
written). The table shows per-workload medians over `--repeat` repetitions
and the median of the per-repetition ratios other time / sackli time
(above 1 means sackli is faster). The load average is printed before and
after: other work on the machine makes the numbers noisy.

`--runner-mode in_memory` (the default) runs every pipeline in this process
(`--direct_num_workers=1`); `multi_processing` runs
`--direct_running_mode=multi_processing --direct_num_workers=2`. sackli's
writer compresses `.bagz` batches on all cores; Beam compresses TFRecord
shards in the bundle's thread. Files go to a temporary folder, removed at the
end (`--keep DIR` writes them under DIR and keeps them).

    python benchmarks/beam_tfrecord.py            # 1,000,000 x 1 KiB (~1 GB), 3 repetitions
    python benchmarks/beam_tfrecord.py --quick    # 50,000 x 1 KiB (~50 MB), 3 repetitions, ~1 min
    python benchmarks/beam_tfrecord.py --runner-mode multi_processing --json out.json

`--remote-ranges` measures something else, alone: the traffic of reading one
remote shard in 16 ranges. It starts moto's S3 server behind the tests'
counting proxy (tests/remote_servers.py), writes one `.bag` of `--records`
(default 400,000; quick 100,000) records of ~160 bytes, and reads it with
ReadFromSackli on the DirectRunner, the runner asking for 16 ranges. Each
range opens its own reader; the table shows the bytes the server sent over
the shard's size, with limits_storage=IN_MEMORY (every range loads all the
limits: what every remote range did before ON_DISK meant lazy for remote
files) and ON_DISK (each range fetches the limits pages it needs).

    python benchmarks/beam_tfrecord.py --remote-ranges
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import random
import shutil
import statistics
import struct
import tempfile
import time
from typing import Any, Callable, Iterable, Iterator

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import zstandard
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

import sackli
import sackli.beam

CHUNK_RECORDS = 1000  # records per generator element
_INDEX_BYTES = 16


def _text(seed: int = 0) -> bytes:
    """~260 KB of words from a 512-word vocabulary of 2-9 letters."""
    rng = random.Random(seed)
    words = [bytes(rng.choices(b"abcdefghijklmnop", k=rng.randint(2, 9))) for _ in range(512)]
    return b" ".join(rng.choices(words, k=40_000))


_TEXT = _text()


def chunk_records(chunk: int, records: int, record_bytes: int) -> list[bytes]:
    """Records [chunk * CHUNK_RECORDS, ...) of `records`: each a 16-byte
    index, then half random bytes (seeded by the chunk), then a phrase of
    24-64 bytes of text repeated: compressible within the record, as
    sackli's per-record zstd sees it, not only across records."""
    first = chunk * CHUNK_RECORDS
    count = max(0, min(CHUNK_RECORDS, records - first))
    rng = random.Random(chunk)
    body = max(0, record_bytes - _INDEX_BYTES)
    noise_bytes = body // 2
    text_bytes = body - noise_bytes
    noise = rng.randbytes(noise_bytes * count)
    out = []
    for k in range(count):
        start = rng.randrange(len(_TEXT) - 64)
        phrase = _TEXT[start:start + rng.randint(24, 64)]
        record = (b"%015d " % (first + k) + noise[k * noise_bytes:(k + 1) * noise_bytes]
                  + phrase * (text_bytes // len(phrase) + 1))
        out.append(record[:record_bytes])
    return out


class Bench:
    """The pipelines of one run: paths, sizes and pipeline options."""

    def __init__(self, folder: str, records: int, record_bytes: int, shards: int,
                 runner_mode: str) -> None:
        self.folder = folder
        self.shards = shards
        self.records = records
        self.record_bytes = record_bytes
        self.chunks = -(-records // CHUNK_RECORDS)
        flags = [f"--direct_running_mode={runner_mode}"]
        flags.append("--direct_num_workers=2" if runner_mode == "multi_processing"
                     else "--direct_num_workers=1")
        self.flags = flags

    def path(self, kind: str) -> str:
        return os.path.join(self.folder, kind)

    def run(self, build: Callable[[beam.Pipeline], Any]) -> float:
        start = time.perf_counter()
        pipeline = beam.Pipeline(runner="DirectRunner", options=PipelineOptions(self.flags))
        build(pipeline)
        pipeline.run().wait_until_finish()
        return time.perf_counter() - start

    def generate(self, p: beam.Pipeline) -> beam.PCollection:
        return (p | "Chunks" >> beam.Create(range(self.chunks))
                  | "Records" >> beam.FlatMap(chunk_records, self.records, self.record_bytes))

    def check_count(self, records: beam.PCollection) -> None:
        assert_that(records | beam.combiners.Count.Globally(), equal_to([self.records]))

    def fresh(self, kind: str) -> str:
        shutil.rmtree(self.path(kind), ignore_errors=True)
        os.makedirs(self.path(kind))
        return self.path(kind)

    # The pipelines; each returns its wall time in seconds.

    def generate_only(self) -> float:
        return self.run(lambda p: self.check_count(self.generate(p)))

    def write_sackli(self, suffix: str) -> float:
        folder = self.fresh(suffix.strip("."))
        return self.run(lambda p: self.generate(p) | sackli.beam.WriteToSackli(
            os.path.join(folder, f"out@{self.shards or '*'}{suffix}")))

    def write_tfrecord(self, zstd: bool) -> float:
        folder = self.fresh("tfrecord_zstd" if zstd else "tfrecord")
        return self.run(lambda p: self.generate(p) | beam.io.WriteToTFRecord(
            os.path.join(folder, "out"),
            file_name_suffix=".tfrecord.zst" if zstd else ".tfrecord",
            num_shards=self.shards,
            compression_type=CompressionTypes.ZSTD if zstd else CompressionTypes.UNCOMPRESSED))

    def read_sackli(self, suffix: str) -> float:
        pattern = os.path.join(self.path(suffix.strip(".")), f"out@*{suffix}")
        return self.run(lambda p: self.check_count(p | sackli.beam.ReadFromSackli(pattern)))

    def read_tfrecord(self, zstd: bool) -> float:
        if zstd:
            pattern, compression = "tfrecord_zstd/out-*.tfrecord.zst", CompressionTypes.ZSTD
        else:
            pattern, compression = "tfrecord/out-*.tfrecord", CompressionTypes.UNCOMPRESSED
        pattern = os.path.join(self.folder, pattern)
        return self.run(lambda p: self.check_count(
            p | beam.io.ReadFromTFRecord(pattern, compression_type=compression)))

    def check_rows(self, sizes: beam.PCollection) -> None:
        assert_that(sizes | beam.CombineGlobally(sum), equal_to([self.records]))

    def read_sackli_batched(self, decode: str | None) -> float:
        pattern = os.path.join(self.path("bag"), "out@*.bag")
        size = len if decode == "raw" else (lambda batch: batch.num_rows)
        return self.run(lambda p: self.check_rows(
            p | sackli.beam.ReadFromSackliBatched(pattern, decode) | beam.Map(size)))

    def write_parquet(self) -> None:
        """The `.bag` set's records as Parquet files (not timed)."""
        folder = self.fresh("parquet")
        shards = sackli.Reader(os.path.join(self.path("bag"), "out@*.bag"))
        files = max(1, self.shards)
        for i, (start, stop) in enumerate(_even_ranges(len(shards), files)):
            column = pa.array(shards.read_range(start, stop - start), pa.binary())
            pq.write_table(pa.table({"record": column}),
                           os.path.join(folder, f"out-{i:05d}-of-{files:05d}.parquet"),
                           compression="none")

    def read_parquet_batched(self) -> float:
        pattern = os.path.join(self.path("parquet"), "out-*.parquet")
        return self.run(lambda p: self.check_rows(
            p | beam.io.ReadFromParquetBatched(pattern) | beam.Map(lambda t: t.num_rows)))

    def stored_mb(self, kind: str) -> float:
        folder = self.path(kind)
        return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)) / 1e6

    def verify(self) -> None:
        """Every written file set holds exactly the generated records (an
        order-independent digest), checked outside the timings."""
        expected = digest(r for c in range(self.chunks)
                          for r in chunk_records(c, self.records, self.record_bytes))
        for kind in ("bag", "bagz"):
            got = digest(sackli.Reader(os.path.join(self.path(kind), f"out@*.{kind}")))
            assert got == expected, (kind, got, expected)
        for kind in ("tfrecord", "tfrecord_zstd"):
            folder = self.path(kind)
            got = digest(r for name in sorted(os.listdir(folder))
                         for r in tfrecords(os.path.join(folder, name)))
            assert got == expected, (kind, got, expected)


def _even_ranges(total: int, parts: int) -> list[tuple[int, int]]:
    cuts = [total * k // parts for k in range(parts + 1)]
    return list(zip(cuts, cuts[1:]))


def digest(records: Iterable[bytes]) -> tuple[int, int]:
    """(count, sum of 64-bit record hashes mod 2**64)."""
    count = total = 0
    for record in records:
        count += 1
        total += int.from_bytes(hashlib.blake2b(bytes(record), digest_size=8).digest(), "little")
    return count, total % (1 << 64)


def tfrecords(path: str) -> Iterator[bytes]:
    """The records of a TFRecord file (zstd if named *.zst), CRCs unchecked."""
    opener = zstandard.open if path.endswith(".zst") else open
    with opener(path, "rb") as stream:
        while header := stream.read(12):
            (length,) = struct.unpack("<Q", header[:8])
            yield stream.read(length)
            stream.read(4)


def run(bench: Bench, repeat: int, verify: bool) -> list[dict[str, Any]]:
    # (workload, sackli run, other run, kind, the other implementation)
    pairs: list[tuple[str, Callable[[], float], Callable[[], float], str, str]] = [
        ("write .bag / tfrecord", lambda: bench.write_sackli(".bag"),
         lambda: bench.write_tfrecord(False), "write", "tfrecord"),
        ("write .bagz / tfrecord zstd", lambda: bench.write_sackli(".bagz"),
         lambda: bench.write_tfrecord(True), "write", "tfrecord"),
        ("read .bag / tfrecord", lambda: bench.read_sackli(".bag"),
         lambda: bench.read_tfrecord(False), "read", "tfrecord"),
        ("read .bagz / tfrecord zstd", lambda: bench.read_sackli(".bagz"),
         lambda: bench.read_tfrecord(True), "read", "tfrecord"),
        ("batched .bag / parquet", lambda: bench.read_sackli_batched(None),
         bench.read_parquet_batched, "read", "parquet batched"),
        ("raw lists .bag / parquet", lambda: bench.read_sackli_batched("raw"),
         bench.read_parquet_batched, "read", "parquet batched"),
    ]
    others = {name: other for name, *_, other in pairs}
    baseline: list[float] = []
    times: dict[str, dict[str, list[float]]] = {
        name: {"sackli": [], "other": []} for name, *_ in pairs}
    for rep in range(repeat):
        baseline.append(bench.generate_only())
        print(f"  [{rep + 1}/{repeat}] {'generate only':<28} {baseline[-1]:8.2f} s", flush=True)
        for name, sackli_fn, other_fn, kind, other in pairs:
            if kind == "read" and rep == 0 and verify:
                start = time.perf_counter()
                bench.verify()
                print(f"  verified all four file sets ({time.perf_counter() - start:.1f} s, "
                      "not timed)", flush=True)
                verify = False
            if kind == "read" and rep == 0 and not os.path.isdir(bench.path("parquet")):
                bench.write_parquet()
            order = [("sackli", sackli_fn), ("other", other_fn)]
            for impl, fn in order if rep % 2 == 0 else order[::-1]:
                times[name][impl].append(fn())
            print(f"  [{rep + 1}/{repeat}] {name:<28} sackli {times[name]['sackli'][-1]:8.2f} s"
                  f"   {other} {times[name]['other'][-1]:8.2f} s", flush=True)

    megabytes = bench.records * bench.record_bytes / 1e6
    stored = {"write .bag / tfrecord": ("bag", "tfrecord"),
              "write .bagz / tfrecord zstd": ("bagz", "tfrecord_zstd")}
    rows = [{"workload": "generate only", "implementation": "(baseline)",
             "seconds": statistics.median(baseline), "runs": baseline}]
    for name, *_ in pairs:
        ratios = [t / s for s, t in zip(times[name]["sackli"], times[name]["other"])]
        for impl in ("sackli", "other"):
            rows.append({"workload": name,
                         "implementation": "sackli" if impl == "sackli" else others[name],
                         "seconds": statistics.median(times[name][impl]),
                         "runs": times[name][impl],
                         "ratio": statistics.median(ratios) if impl == "sackli" else None})
            if name in stored:
                rows[-1]["stored_mb"] = bench.stored_mb(stored[name][impl != "sackli"])
    for row in rows:
        row["records_per_s"] = bench.records / row["seconds"]
        row["mb_per_s"] = megabytes / row["seconds"]
    return rows


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def print_table(report: dict[str, Any]) -> None:
    shards = report["shards"] or "runner-decided"
    print(f"\n{report['records']:,} records of {report['record_bytes']:,} bytes "
          f"({report['payload_mb']:,.0f} MB), {shards} shards, DirectRunner "
          f"{report['runner_mode']}; medians of {report['repeat']}")
    print(f"| {'workload':<27} | {'implementation':<15} | {'seconds':>8} | {'records/s':>10} | "
          f"{'MB/s':>6} | {'stored MB':>9} | {'other/sackli':>15} |")
    print(f"|{'-' * 29}|{'-' * 17}|{'-' * 10}|{'-' * 12}|{'-' * 8}|{'-' * 11}|{'-' * 17}|")
    for r in report["results"]:
        stored = f"{r['stored_mb']:>9.1f}" if "stored_mb" in r else " " * 9
        ratio = f"{r['ratio']:>14.2f}x" if r.get("ratio") is not None else " " * 15
        print(f"| {r['workload']:<27} | {r['implementation']:<15} | {r['seconds']:>8.2f} | "
              f"{r['records_per_s']:>10,.0f} | {r['mb_per_s']:>6.1f} | {stored} | {ratio} |")


# --- --remote-ranges: what 16 ranges of a remote shard download -------------------

REMOTE_RANGES = 16


def remote_ranges_traffic(records: int, repeat: int) -> list[dict[str, Any]]:
    """Reads one moto-served shard in REMOTE_RANGES ranges with each limits
    storage; rows of bytes fetched / shard size and seconds (medians)."""
    import pathlib
    import sys

    from apache_beam.io import iobase

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # also under PYTHONSAFEPATH
    from moto_s3 import serve_s3

    chunk_size = iobase.Read.get_desired_chunk_size
    with serve_s3() as (server, proxy):
        import boto3
        boto3.client("s3", endpoint_url=server.url).create_bucket(Bucket="bench")
        url = "s3://bench/ranges.bag"
        rng = random.Random(2)
        with sackli.Writer(url) as writer:
            writer.write_many(b"%d:" % i + rng.randbytes(rng.randrange(100, 210))
                              for i in range(records))
        size = sackli.Reader(url).stored_bytes + 8 * records  # a TAIL bag's size
        options = PipelineOptions([f"--s3_endpoint_url={server.url}", "--s3_access_key_id=bench",
                                   "--s3_secret_access_key=bench", "--s3_region_name=us-east-1"])
        # The runner asks the source for ranges of this size.
        iobase.Read.get_desired_chunk_size = staticmethod(lambda total: -(-size // REMOTE_RANGES))
        try:
            return [remote_ranges_row(url, size, records, storage, options, proxy, repeat)
                    for storage in (sackli.LimitsStorage.IN_MEMORY, sackli.LimitsStorage.ON_DISK)]
        finally:
            iobase.Read.get_desired_chunk_size = chunk_size


def remote_ranges_row(url: str, size: int, records: int, storage: sackli.LimitsStorage,
                      options: PipelineOptions, proxy: Any, repeat: int) -> dict[str, Any]:
    """Reads the shard `repeat` times with `storage`; medians."""
    fetched, seconds = [], []
    for _ in range(repeat):
        proxy.reset_counts()
        start = time.perf_counter()
        with beam.Pipeline(options=options) as p:
            count = (p | sackli.beam.ReadFromSackli(
                url, options=sackli.Reader.Options(limits_storage=storage), validate=False)
                | beam.combiners.Count.Globally())
            assert_that(count, equal_to([records]))
        seconds.append(time.perf_counter() - start)
        fetched.append(proxy.bytes_sent["GET"])
    return {"limits_storage": storage.name, "shard_bytes": size,
            "fetched_bytes": statistics.median(fetched),
            "fetched_over_shard": statistics.median(fetched) / size,
            "seconds": statistics.median(seconds)}


def print_remote_ranges(rows: list[dict[str, Any]], records: int) -> None:
    print(f"# one .bag of {records:,} records on moto S3 read by ReadFromSackli in "
          f"{REMOTE_RANGES} ranges (DirectRunner); medians")
    print("| limits_storage | shard bytes | bytes fetched | fetched / shard | seconds |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['limits_storage']} | {row['shard_bytes']:,} | {row['fetched_bytes']:,.0f} | "
              f"{row['fetched_over_shard']:.3f}x | {row['seconds']:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="~50 MB instead of ~1 GB")
    parser.add_argument("--records", type=int, help="records (default 1,000,000, quick 50,000)")
    parser.add_argument("--record-bytes", type=int, default=1024, help="bytes per record (1024)")
    parser.add_argument("--repeat", type=int, help="repetitions (default 3)")
    parser.add_argument("--shards", type=int, default=8,
                        help="output shards of every write (default 8; 0: the runner decides)")
    parser.add_argument("--runner-mode", choices=["in_memory", "multi_processing"],
                        default="in_memory", help="DirectRunner running mode (default in_memory)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--keep", metavar="DIR", help="write the files under DIR and keep them")
    parser.add_argument("--no-verify", action="store_true", help="skip reading the files back")
    parser.add_argument("--remote-ranges", action="store_true",
                        help="only measure what 16 ranges of a remote shard download (see above)")
    args = parser.parse_args()
    if args.remote_ranges:
        logging.getLogger("apache_beam").setLevel(logging.ERROR)
        count = args.records or (100_000 if args.quick else 400_000)
        rows = remote_ranges_traffic(count, args.repeat or 3)
        print_remote_ranges(rows, count)
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"records": count, "remote_ranges": rows}, out, indent=2)
        return
    records = args.records or (50_000 if args.quick else 1_000_000)
    repeat = args.repeat or 3
    if records < 1 or args.record_bytes < _INDEX_BYTES or repeat < 1 or args.shards < 0:
        parser.error(f"need --records >= 1, --record-bytes >= {_INDEX_BYTES}, --repeat >= 1, "
                     "--shards >= 0")
    logging.getLogger("apache_beam").setLevel(logging.ERROR)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        folder = os.path.abspath(args.keep)
    else:
        folder = tempfile.mkdtemp(prefix="sackli-beam-bench-")
    report: dict[str, Any] = {
        "records": records, "record_bytes": args.record_bytes,
        "payload_mb": records * args.record_bytes / 1e6, "shards": args.shards, "repeat": repeat,
        "runner_mode": args.runner_mode,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "python": platform.python_version(), "apache_beam": beam.__version__,
        "zstandard": zstandard.__version__, "sackli": sackli.__version__,
    }
    print(f"{report['machine']}; Python {report['python']}, apache-beam {report['apache_beam']}, "
          f"zstandard {report['zstandard']}, sackli {report['sackli']}")
    print(f"{records:,} records of {args.record_bytes:,} bytes in {folder}, {repeat} repetitions, "
          f"DirectRunner {args.runner_mode}; load average {load()}", flush=True)
    report["load_before"] = load()
    # multi_processing workers run `python -m ...` in this folder, and `-m` puts
    # the working directory first on sys.path: from a source checkout they
    # would import its sackli/ (without the built extension), not the
    # installed package.
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        report["results"] = run(Bench(folder, records, args.record_bytes, args.shards,
                                      args.runner_mode),
                                repeat, not args.no_verify)
    finally:
        os.chdir(cwd)
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    report["load_after"] = load()
    print_table(report)
    print(f"load average {report['load_before']} before, {report['load_after']} after")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)


if __name__ == "__main__":
    main()
