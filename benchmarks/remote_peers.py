"""Remote reads against bagz-gcs and upstream Säckli: sackli on buckets next
to its peers, in one run.

Starts fake-gcs-server (gs) and moto's S3 server (s3) on 127.0.0.1, each
behind the tests' FaultProxy (tests/remote_servers.py), which adds latency to
every request and counts requests, GET body bytes and the most requests in
flight at once. It writes one bag of random 1-16 KiB records as `.bag` and
`.bagz` (zstd records), uploads them around the proxy, and times, medians of
`--repeat` with the implementations alternating:

  implementations
    sackli              this project's sackli, the one installed in the
                        running interpreter, default options;
    sackli cache cold   with `cache_dir=` an empty folder (a new one per run);
    sackli cache warm   with `cache_dir=` a folder that holds the whole bag;
    bagz, bagz IN_MEMORY  Google's bagz 0.3.8 with bagz-gcs 0.3.8 (gs only:
                        bagz has no S3 file system), default limits and
                        `limits_storage=IN_MEMORY`;
    upstream            upstream Säckli 0.3.4 (PyPI `sackli`): gs through
                        google-cloud-cpp; s3 only if its S3 client can be
                        pointed at a local server (see the row);
    local sackli, local bagz   the same files on local disk.
  workloads (each run opens a new Reader, its time included; each worker
  first opens one bag untimed, so a client's start-up is left out)
    open+len            open, len();
    open+len @16        the same records as a 16-shard set (gs: a list of
                        its 16 shards);
    singles             `r[i]` for `--singles` random indices;
    batch               `read_indices` of `--batch` random indices;
    scan                iterate every record in order;
    epoch               `read_indices_iter` over a permutation of the
                        first `--epoch-records` records.
  settings
    direct              straight to the server (no proxy, so no counts);
    +N ms               through the proxy adding N ms per request
                        (`--latency 0,20,50`: 0 means direct).

Every record read is checked (a CRC-32 in reading order) against the records
written. Each implementation runs in a subprocess of its own
(benchmarks/_peer_worker.py, JSON lines on stdin/stdout), so no two modules
named `sackli` meet; the peers live in virtualenvs made once under
`--peers-dir` (benchmarks/_peer_envs.py, pinned, from PyPI). A peer that
cannot be installed or cannot reach the local server gets a row saying why,
and the run goes on.

On gs each object lives in a bucket of its own, and the 16-shard set is
given as a comma-separated list of its shards: bagz-gcs and upstream Säckli
open a file by listing its bucket with `matchGlob` (no prefix), which
fake-gcs-server ignores, so in a shared bucket they would open every object
as shards of one bag. (gcp-storage-emulator honours `matchGlob` but answers
one request at a time, which stalls bagz-gcs's parallel reads for minutes.)
moto copies a whole object for every ranged
GET (a 170 MB object: ~0.4 s per GET), so on s3 each file is stored as
shards of at most `--s3-shard-mb` MB; the file column says how many.

    python benchmarks/remote_peers.py --quick          # 2,000 records, direct and +20 ms: ~7 min
    python benchmarks/remote_peers.py                  # 20,000 records, direct, +20 and +50 ms: ~30-40 min (estimated from --quick)
    python benchmarks/remote_peers.py --only gs --latency 0,50 --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import pathlib
import platform
import random
import select
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from typing import Any, Iterator

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # also under PYTHONSAFEPATH
sys.path.insert(0, str(HERE.parent / "tests"))
import _peer_envs  # noqa: E402
from remote_servers import FakeGcsServer, FaultProxy, MotoServer  # noqa: E402
from remote_cache import make_records  # noqa: E402  (the same records as that benchmark's)

import sackli  # noqa: E402

WORKER = HERE / "_peer_worker.py"
BUCKET = "sackli-bench-peers"
WORKLOADS = ("open+len", "open+len @16", "singles", "batch", "scan", "epoch")
IMPLEMENTATIONS = ("sackli", "sackli cache cold", "sackli cache warm", "bagz", "bagz IN_MEMORY", "upstream")
LOCAL_IMPLEMENTATIONS = ("local sackli", "local bagz")
PEER_NAMES = ("bagz", "upstream")  # this benchmark's of _peer_envs.PEERS (loader_peers.py has the others)
CACHE_MAX_BYTES = 8 << 30
# An epoch costs about a request per record for every peer: it sets the run time.
QUICK = dict(records=2_000, singles=30, batch=500, epoch_records=500, latency="0,20", repeat=3)
FULL = dict(records=20_000, singles=50, batch=1_000, epoch_records=1_000, latency="0,20,50", repeat=3)


@dataclasses.dataclass(frozen=True)
class Impl:
    """One row label: the worker module it runs in and its Reader options."""

    name: str
    kind: str  # "sackli" (this project), "bagz" or "upstream"
    options: tuple[tuple[str, Any], ...] = ()
    cache: str | None = None  # None, "cold" or "warm"


IMPLS = {
    "sackli": Impl("sackli", "sackli"),
    "sackli cache cold": Impl("sackli cache cold", "sackli", cache="cold"),
    "sackli cache warm": Impl("sackli cache warm", "sackli", cache="warm"),
    "bagz": Impl("bagz", "bagz"),
    "bagz IN_MEMORY": Impl("bagz IN_MEMORY", "bagz", (("limits_storage", "IN_MEMORY"),)),
    "upstream": Impl("upstream", "upstream"),
    "local sackli": Impl("local sackli", "sackli"),
    "local bagz": Impl("local bagz", "bagz"),
}


# --- data ---------------------------------------------------------------------

def shard_names(stem: str, count: int, suffix: str) -> list[str]:
    return [f"{stem}-{i:05d}-of-{count:05d}{suffix}" for i in range(count)]


def write_bags(folder: pathlib.Path, records: list[bytes], s3_shards: dict[str, int]) -> dict[str, list[str]]:
    """Writes `bench.bag(z)` (one file), `set16.bag(z)` (16 shards) and
    `s3set.bag(z)` (`s3_shards[suffix]` shards) in `folder`; the object
    names of each spec, keyed by spec."""
    files: dict[str, list[str]] = {}
    for suffix in (".bag", ".bagz"):
        layouts = {f"bench{suffix}": [f"bench{suffix}"],
                   f"set16@16{suffix}": shard_names("set16", 16, suffix),
                   f"s3set@{s3_shards[suffix]}{suffix}": shard_names("s3set", s3_shards[suffix], suffix)}
        for spec, names in layouts.items():
            per_shard = math.ceil(len(records) / len(names))
            for i, name in enumerate(names):
                with sackli.Writer(str(folder / name)) as writer:
                    writer.write_many(records[i * per_shard:(i + 1) * per_shard])
            files[spec] = names
    return files


def gs_bucket(name: str) -> str:
    """The bucket of object `name` on gs: one per object (see the docstring)."""
    return "sbp-" + name.lower().replace(".", "-").replace("@", "-")


def remote_url(scheme: str, spec: str, files: dict[str, list[str]]) -> str:
    """What a Reader opens for `spec` (a key of `files`) on `scheme`: on gs a
    comma-separated list of its objects, each in its bucket."""
    if scheme == "gs":
        return ",".join(f"gs://{gs_bucket(name)}/{name}" for name in files[spec])
    return f"{scheme}://{BUCKET}/{spec}"


def checksum(records: list[bytes], indices: Any) -> int:
    crc = 0
    for i in indices:
        crc = zlib.crc32(records[i], crc)
    return crc


# --- workers ------------------------------------------------------------------

class Worker:
    """One implementation's subprocess (benchmarks/_peer_worker.py)."""

    live: set["Worker"] = set()  # for `kill_all` when the run is cut short

    def __init__(self, python: str, module: str, env: dict[str, str], log: pathlib.Path) -> None:
        self.log = log
        self._stderr = open(log, "ab")
        self.process = subprocess.Popen([python, "-P", str(WORKER), module], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self._stderr, env=env,
                                        text=True, cwd=tempfile.gettempdir())
        Worker.live.add(self)
        self.hello = self._answer(120)

    @classmethod
    def kill_all(cls) -> None:
        """Ends the workers still running (a worker blocked on a socket does
        not see its input close)."""
        for worker in list(cls.live):
            if worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()
            worker._stderr.close()
        cls.live.clear()

    def _answer(self, timeout: float) -> dict[str, Any]:
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.close()
            what = "no answer within %.0f s" % timeout if not ready else "the worker exited"
            tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] if self.log.exists() else []
            return {"error": what + (f": {tail[0][:300]}" if tail else "")}
        return json.loads(line)

    def run(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        if self.process.poll() is not None:
            return {"error": "the worker is not running"}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._answer(timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write("\n")
                self.process.stdin.flush()
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        self._stderr.close()
        Worker.live.discard(self)


def worker_env(kind: str, scheme: str, endpoint: str | None) -> dict[str, str]:
    """The environment of a worker: the storage endpoint for its client
    library, test credentials, and nothing from this user's configuration."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("AWS_", "SACKLI_", "STORAGE_EMULATOR", "CLOUD_STORAGE", "GOOGLE_"))
           and key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
               AWS_REGION="us-east-1", AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
               AWS_EC2_METADATA_DISABLED="true", GOOGLE_CLOUD_PROJECT="test")
    if scheme == "gs" and endpoint:
        # sackli: google-cloud-storage; bagz-gcs and upstream: google-cloud-cpp.
        env["STORAGE_EMULATOR_HOST" if kind == "sackli" else "CLOUD_STORAGE_EMULATOR_ENDPOINT"] = endpoint
    if scheme == "s3" and endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return env


# --- the run ------------------------------------------------------------------

@dataclasses.dataclass
class Case:
    """One (scheme, file, workload): the spec to open and the check."""

    scheme: str
    file: str  # the table's file column
    workload: str
    spec: str
    indices: list[int] | None
    expected: tuple[int, int]  # (checksum, records)
    local_key: tuple[str, str]  # the local sackli row it is compared with: (file, workload)


class Bench:
    """Runs the samples and keeps them, with the proxies' counts."""

    def __init__(self, args: argparse.Namespace, folder: pathlib.Path) -> None:
        self.args, self.folder = args, folder
        self.samples: dict[tuple, list[dict[str, float]]] = {}
        self.notes: dict[tuple, str] = {}
        self.cold = 0

    def sample(self, key: tuple, impl: Impl, worker: Worker, case: Case, proxy: FaultProxy | None,
               warm_dir: pathlib.Path | None) -> None:
        """Times one run of `case` by `impl` and files it under `key`."""
        if key in self.notes and not self.samples.get(key):
            return  # failed before: the note says why
        done = self.samples.get(key, [])
        if done and sum(s["seconds"] for s in done) >= self.args.max_row_seconds:
            self.notes[key] = f"{len(done)} of {self.args.repeat} runs (row over {self.args.max_row_seconds:g} s)"
            return
        options = dict(impl.options)
        cold_dir = None
        if impl.cache == "warm":
            options.update(cache_dir=str(warm_dir), cache_max_bytes=CACHE_MAX_BYTES)
        elif impl.cache == "cold":
            self.cold += 1
            cold_dir = self.folder / f"cache-cold-{self.cold}"
            options.update(cache_dir=str(cold_dir), cache_max_bytes=CACHE_MAX_BYTES)
        if proxy is not None:
            proxy.reset_counts()
        answer = worker.run({"workload": case.workload.split(" ")[0], "spec": case.spec,
                             "options": options, "indices": case.indices}, self.args.timeout)
        if cold_dir is not None:
            shutil.rmtree(cold_dir, ignore_errors=True)
        if "error" in answer:
            self.notes[key] = f"failed: {answer['error']}"
            return
        if (answer["checksum"], answer["records"]) != case.expected:
            self.notes[key] = "failed: the records read differ from those written"
            return
        sample = {"seconds": answer["seconds"]}
        if proxy is not None:
            sample.update(requests=sum(proxy.counts.values()), get_bytes=proxy.bytes_sent["GET"],
                          max_in_flight=proxy.max_in_flight)
        self.samples.setdefault(key, []).append(sample)


def cases_for(scheme: str, files: dict[str, list[str]], records: list[bytes], schemes: list[str],
              indices: dict[str, list[int]], local: pathlib.Path | None = None) -> list[Case]:
    """The cases of `scheme`: "gs", "s3", or "local" (with `local` the
    folder): the local copies of the files the remote `schemes` read."""
    n = len(records)
    expected = {"open+len": (n, 0), "scan": (checksum(records, range(n)), n)}
    for workload in ("singles", "batch", "epoch"):
        expected[workload] = (checksum(records, indices[workload]), len(indices[workload]))
    out = []
    for suffix in (".bag", ".bagz"):
        s3_spec = next(spec for spec in files if spec.startswith("s3set@") and spec.endswith(suffix))
        s3_file = f"{suffix} @{len(files[s3_spec])}"
        layouts = []  # (file column, spec, with the @16 set's open)
        if scheme == "gs" or scheme == "local" and "gs" in schemes:
            layouts.append((suffix, f"bench{suffix}", True))
        if scheme == "s3" or scheme == "local" and "s3" in schemes:
            layouts.append((s3_file, s3_spec, False))  # s3's files are shard sets already
        for file, spec, with_set in layouts:
            for workload in WORKLOADS:
                if workload == "open+len @16" and not with_set:
                    continue
                name = f"set16@16{suffix}" if workload == "open+len @16" else spec
                url = str(local / name) if scheme == "local" else remote_url(scheme, name, files)
                kind = workload.split(" ")[0]
                out.append(Case(scheme, file, workload, url, indices.get(kind), expected[kind], (file, workload)))
    return out


def settings_of(args: argparse.Namespace) -> list[float]:
    values = [float(part) for part in args.latency.split(",") if part.strip()]
    if not values or any(v < 0 for v in values):
        raise SystemExit(f"--latency {args.latency!r}: comma-separated milliseconds, 0 for direct")
    return values


def setting_label(latency_ms: float) -> str:
    return "direct" if latency_ms == 0 else f"+{latency_ms:g} ms"


@dataclasses.dataclass
class Store:
    """A running server, its proxy, and an uploader that goes around it."""

    scheme: str
    server: Any
    proxy: FaultProxy


@contextlib.contextmanager
def serve(schemes: list[str]) -> Iterator[dict[str, Store]]:
    """Starts the servers of `schemes` with a proxy each; stops them on exit."""
    stores: dict[str, Store] = {}
    try:
        for scheme in schemes:
            server = FakeGcsServer() if scheme == "gs" else MotoServer()
            stores[scheme] = Store(scheme, server, FaultProxy(scheme))
            server.start()
            stores[scheme].proxy.upstream = server.url
            stores[scheme].proxy.start()
        yield stores
    finally:
        for store in stores.values():
            store.proxy.stop()
            store.server.close()


def upload(store: Store, folder: pathlib.Path, names: list[str]) -> None:
    """Puts `names` from `folder` into the bucket, straight to the server."""
    if store.scheme == "gs":
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                client_options=ClientOptions(api_endpoint=store.server.url))
        for name in names:
            client.create_bucket(gs_bucket(name)).blob(name).upload_from_filename(str(folder / name))
        return
    import boto3

    client = boto3.client("s3", endpoint_url=store.server.url, region_name="us-east-1",
                          aws_access_key_id="bench", aws_secret_access_key="bench")
    if BUCKET not in [b["Name"] for b in client.list_buckets().get("Buckets", [])]:
        client.create_bucket(Bucket=BUCKET)
    for name in names:
        client.upload_file(str(folder / name), BUCKET, name)


def warm(stores: dict[str, Store], files: dict[str, list[str]], folder: pathlib.Path,
         args: argparse.Namespace, log) -> dict[str, tuple[pathlib.Path, str]]:
    """Fills a cache folder per scheme with every remote file (a scan of each,
    straight to the server); scheme -> (folder, "" or why it failed)."""
    out = {}
    for scheme, store in stores.items():
        warm_dir = folder / f"cache-warm-{scheme}"
        worker = Worker(sys.executable, "sackli", worker_env("sackli", scheme, store.server.url),
                        folder / f"worker-warm-{scheme}.log")
        problem = worker.hello.get("error", "")
        start = time.perf_counter()
        specs = [spec for spec in files if (spec.startswith("s3set@") if scheme == "s3" else not spec.startswith("s3set@"))]
        for spec in specs if not problem else []:
            answer = worker.run({"workload": "scan", "spec": remote_url(scheme, spec, files),
                                 "options": {"cache_dir": str(warm_dir), "cache_max_bytes": CACHE_MAX_BYTES}},
                                args.timeout)
            if "error" in answer:
                problem = f"failed to warm the cache: {answer['error']}"
                break
        worker.close()
        log(f"# warmed the cache of {scheme} ({', '.join(specs)}) in {time.perf_counter() - start:.1f} s")
        out[scheme] = (warm_dir, problem)
    return out


def why_not(impl: Impl, scheme: str, stopped: dict[str, str], upstream_s3_ok: bool, upstream_s3_why: str,
            warm_problem: str) -> str:
    """Why `impl` cannot run on `scheme` ("" if it can)."""
    if impl.kind in stopped:
        return stopped[impl.kind]
    if scheme == "s3" and impl.kind == "bagz":
        return "bagz 0.3.8 has no S3 file system (bagz-gcs is for gs:// only)"
    if scheme == "s3" and impl.kind == "upstream" and not upstream_s3_ok:
        return upstream_s3_why
    if impl.cache == "warm" and warm_problem:
        return warm_problem
    return ""


def start_workers(bench: Bench, impls: list[Impl], scheme: str, setting: str, endpoint: str | None,
                  cases: list[Case], pythons: dict[str, str], versions: dict[str, str],
                  unavailable: dict[tuple[str, str], str]) -> dict[str, Worker]:
    """A started worker per implementation (name -> worker); one that cannot
    start gets a note in each of its rows (a "not run" row for local)."""
    workers = {}
    for impl in impls:
        log = bench.folder / f"worker-{scheme}-{setting}-{impl.name}.log".replace(" ", "_")
        worker = Worker(pythons[impl.kind], "bagz" if impl.kind == "bagz" else "sackli",
                        worker_env(impl.kind, scheme, endpoint), log)
        if "error" in worker.hello:
            unavailable[(scheme, impl.name)] = f"failed to start: {worker.hello['error']}"
            continue
        versions[impl.kind] = worker.hello.get("version", "?")
        # Untimed: the client library's start-up (credentials, connections).
        worker.run({"workload": "open+len", "spec": cases[0].spec, "options": dict(impl.options)},
                   bench.args.timeout)
        workers[impl.name] = worker
    return workers


def run_setting(bench: Bench, scheme: str, setting: str, cases: list[Case], impls: list[Impl],
                workers: dict[str, Worker], proxy: FaultProxy | None, warm_dir: pathlib.Path | None,
                log) -> None:
    """`--repeat` rounds of every case, the implementations alternating (the
    first one moves on each round)."""
    for round_number in range(bench.args.repeat):
        start = time.perf_counter()
        for case in cases:
            shift = round_number % max(1, len(impls))
            for impl in impls[shift:] + impls[:shift]:
                key = (scheme, setting, case.file, case.workload, impl.name)
                if impl.name in workers:
                    bench.sample(key, impl, workers[impl.name], case, proxy, warm_dir)
        log(f"# {scheme} {setting}: round {round_number + 1} of {bench.args.repeat} "
            f"done in {time.perf_counter() - start:.1f} s")


def _median(samples: list[dict[str, float]], field: str) -> float | None:
    values = [s[field] for s in samples if field in s]
    return statistics.median(values) if values else None


def table_rows(bench: Bench, all_cases: dict[str, list[Case]], settings: dict[str, list[str]],
               impl_names: dict[str, list[str]], unavailable: dict[tuple[str, str], str]) -> list[dict[str, Any]]:
    """The table's rows, in order: gs, s3, local; setting, file, workload,
    implementation."""
    def median_of(key: tuple) -> float | None:
        samples = bench.samples.get(key)
        return _median(samples, "seconds") if samples else None

    rows = []
    for scheme, cases in all_cases.items():
        for setting in settings[scheme]:
            for case in cases:
                local = median_of(("local", "local", *case.local_key, "local sackli"))
                reference = median_of((scheme, setting, case.file, case.workload,
                                       "local sackli" if scheme == "local" else "sackli"))
                for name in impl_names[scheme]:
                    key = (scheme, setting, case.file, case.workload, name)
                    samples = bench.samples.get(key, [])
                    if not samples and key not in bench.notes:
                        continue
                    seconds = median_of(key)
                    rows.append({
                        "scheme": scheme, "setting": setting, "file": case.file, "workload": case.workload,
                        "implementation": name, "seconds": seconds, "runs": len(samples),
                        "x_local_sackli": seconds / local if seconds and local else None,
                        "sackli_over_this": reference / seconds if seconds and reference else None,
                        "requests": _median(samples, "requests"), "get_mb": (
                            _median(samples, "get_bytes") / 1e6 if _median(samples, "get_bytes") is not None else None),
                        "max_in_flight": _median(samples, "max_in_flight"), "note": bench.notes.get(key, "")})
        for (where, name), reason in unavailable.items():
            if where == scheme:
                rows.append({"scheme": scheme, "setting": "-", "file": "-", "workload": "-", "implementation": name,
                             "seconds": None, "runs": 0, "x_local_sackli": None, "sackli_over_this": None,
                             "requests": None, "get_mb": None, "max_in_flight": None, "note": f"not run: {reason}"})
    return rows


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The table; the note column only when a row has a note (the table
    then fits the docs page)."""
    notes = any(row["note"] for row in rows)
    lines = ["| scheme | setting | file | workload | implementation | median s | x local sackli | "
             "sackli / this | requests | GET MB | max in flight |" + (" note |" if notes else ""),
             "|---|---|---|---|---|--:|--:|--:|--:|--:|--:|" + ("---|" if notes else "")]
    for row in rows:
        seconds = row["seconds"]
        median = "-" if seconds is None else (f"{seconds:.4f}" if seconds < 10 else f"{seconds:.2f}")
        lines.append(" | ".join([
            f"| {row['scheme']}", row["setting"], row["file"], row["workload"], row["implementation"], median,
            _cell(row["x_local_sackli"], ".1f"), _cell(row["sackli_over_this"], ".2f"),
            _cell(row["requests"], ",.0f"), _cell(row["get_mb"], ".1f"), _cell(row["max_in_flight"], ".0f"),
            *([row["note"]] if notes else [])]) + " |")
    return lines


def _git_head() -> str:
    try:
        out = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else ""
    except OSError:
        return ""


def _version(distribution: str) -> str:
    from importlib import metadata
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "?"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="2,000 records, 30 singles, batch 500, epoch 500, direct and +20 ms, 3 rounds (~7 min)")
    parser.add_argument("--records", type=int, help="records in the bag (default 20,000; --quick 2,000)")
    parser.add_argument("--min-size", type=int, default=1024, help="smallest record, bytes")
    parser.add_argument("--max-size", type=int, default=16384, help="largest record, bytes")
    parser.add_argument("--singles", type=int, help="random r[i] per run (default 50; --quick 30)")
    parser.add_argument("--batch", type=int, help="random indices of the batch (default 1,000; --quick 500)")
    parser.add_argument("--epoch-records", type=int,
                        help="the epoch is a permutation of this many first records (default 1,000; --quick 500)")
    parser.add_argument("--latency", help="settings, comma-separated ms added per request, 0 = direct "
                                          "(default 0,20,50; --quick 0,20)")
    parser.add_argument("--repeat", type=int, help="rounds, medians taken (default 3)")
    parser.add_argument("--only", choices=("gs", "s3"), help="one scheme (local rows are kept)")
    parser.add_argument("--s3-shard-mb", type=float, default=4.0, help="largest object on s3 (moto), MB")
    parser.add_argument("--max-row-seconds", type=float, default=60.0,
                        help="a row stops taking runs once its runs add up to this")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one run may take")
    parser.add_argument("--peers-dir", type=pathlib.Path, default=_peer_envs.default_root(),
                        help="where the peers' virtualenvs are made and reused (default %(default)s)")
    parser.add_argument("--no-peers", action="store_true", help="sackli and local rows only")
    parser.add_argument("--bagz-python", help="interpreter for the bagz virtualenv (default: this one)")
    parser.add_argument("--upstream-python", help="interpreter for upstream Säckli (3.12-3.14; default: found)")
    parser.add_argument("--json", metavar="PATH", help="also write the header and rows as JSON")
    args = parser.parse_args(argv)
    for option, value in (QUICK if args.quick else FULL).items():
        if getattr(args, option) is None:
            setattr(args, option, value)
    if min(args.records, args.singles, args.batch, args.epoch_records, args.repeat) < 1:
        parser.error("--records, --singles, --batch, --epoch-records and --repeat must be at least 1")
    return args


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    # SIGTERM unwinds like Ctrl-C, so the servers and workers are stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        return run(argv)
    finally:
        Worker.kill_all()


def run(argv: list[str] | None) -> list[dict[str, Any]]:
    """The whole benchmark (see the module's docstring); the table's rows."""
    args = parse_args(argv)
    began = time.perf_counter()
    load = os.getloadavg()[0]

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    latencies = settings_of(args)
    schemes = [args.only] if args.only else ["gs", "s3"]

    # The peers' virtualenvs, and what stops a peer.
    pythons = {"sackli": sys.executable}
    envs: dict[str, _peer_envs.PeerEnv] = {}
    stopped: dict[str, str] = {}
    for name in PEER_NAMES:
        peer = _peer_envs.PEERS[name]
        if args.no_peers:
            stopped[name] = "--no-peers"
            continue
        envs[name] = _peer_envs.ensure(peer, args.peers_dir, getattr(args, f"{name}_python"), log)
        if envs[name].python:
            pythons[name] = envs[name].python
        else:
            stopped[name] = f"not installed: {envs[name].reason}"
    probe = (_peer_envs.start_upstream_s3_probe(pythons["upstream"])
             if "s3" in schemes and "upstream" in pythons else None)

    rng = random.Random(1)
    records = make_records(args.records, args.min_size, args.max_size)
    n = len(records)
    epoch_records = min(args.epoch_records, n)
    indices = {"singles": [rng.randrange(n) for _ in range(args.singles)],
               "batch": rng.sample(range(n), min(args.batch, n)),
               "epoch": rng.sample(range(epoch_records), epoch_records)}

    with tempfile.TemporaryDirectory(prefix="sackli-bench-peers-") as temporary:
        folder = pathlib.Path(temporary)
        local = folder / "local"
        local.mkdir()
        # s3 shard counts from the sizes: one write of each suffix first.
        sizes = {}
        for suffix in (".bag", ".bagz"):
            with sackli.Writer(str(local / f"probe{suffix}")) as writer:
                writer.write_many(records)
            sizes[suffix] = (local / f"probe{suffix}").stat().st_size
            (local / f"probe{suffix}").unlink()
        s3_shards = {suffix: max(1, math.ceil(size / (args.s3_shard_mb * 1e6))) for suffix, size in sizes.items()}
        files = write_bags(local, records, s3_shards)
        epoch_bytes = sum(len(records[i]) for i in range(epoch_records))
        all_cases = {scheme: cases_for(scheme, files, records, schemes, indices) for scheme in schemes}
        all_cases["local"] = cases_for("local", files, records, schemes, indices, local)
        del records
        log(f"# wrote {n:,} records: .bag {sizes['.bag'] / 1e6:.1f} MB, .bagz {sizes['.bagz'] / 1e6:.1f} MB")

        bench = Bench(args, folder)
        unavailable: dict[tuple[str, str], str] = {}
        impl_names: dict[str, list[str]] = {"local": list(LOCAL_IMPLEMENTATIONS)}
        settings = {scheme: [setting_label(latency) for latency in latencies] for scheme in schemes}
        settings["local"] = ["local"]
        versions: dict[str, str] = {}
        with serve(schemes) as stores:
            for scheme in schemes:
                names = [name for spec, shard_list in files.items() for name in shard_list
                         if spec.startswith("s3set@") == (scheme == "s3")]
                upload(stores[scheme], local, names)
            log(f"# uploaded to {', '.join(schemes)}")
            upstream_s3_ok, upstream_s3_why = False, ""
            if "s3" in schemes and "upstream" in pythons:
                upstream_s3_ok, upstream_s3_why = _peer_envs.upstream_s3_verdict(probe)
            warm_dirs = warm(stores, files, folder, args, log)
            for scheme in schemes:
                impl_names[scheme] = []
                for name in IMPLEMENTATIONS:
                    why = why_not(IMPLS[name], scheme, stopped, upstream_s3_ok, upstream_s3_why,
                                  warm_dirs[scheme][1])
                    if why:
                        unavailable[(scheme, name)] = why
                    else:
                        impl_names[scheme].append(name)
                store = stores[scheme]
                impls = [IMPLS[name] for name in impl_names[scheme]]
                for latency in latencies:
                    setting = setting_label(latency)
                    store.proxy.latency = latency / 1000
                    endpoint = store.server.url if latency == 0 else store.proxy.url
                    workers = start_workers(bench, impls, scheme, setting, endpoint, all_cases[scheme],
                                            pythons, versions, unavailable)
                    run_setting(bench, scheme, setting, all_cases[scheme], impls, workers,
                                None if latency == 0 else store.proxy, warm_dirs[scheme][0], log)
                    for worker in workers.values():
                        worker.close()
                store.proxy.latency = 0.0
        if probe is not None and probe.poll() is None:
            probe.kill()
            probe.wait()

        # The local copies.
        local_impls = []
        for name in LOCAL_IMPLEMENTATIONS:
            if IMPLS[name].kind in stopped:
                unavailable[("local", name)] = stopped[IMPLS[name].kind]
            else:
                local_impls.append(IMPLS[name])
        workers = start_workers(bench, local_impls, "local", "local", None, all_cases["local"],
                                pythons, versions, unavailable)
        run_setting(bench, "local", "local", all_cases["local"], local_impls, workers, None, None, log)
        for worker in workers.values():
            worker.close()

    rows = table_rows(bench, all_cases, settings, impl_names, unavailable)
    header = header_lines(args, n, sizes, s3_shards, epoch_records, epoch_bytes, envs, versions, load,
                          time.perf_counter() - began, argv)
    print("\n".join(header + [""] + markdown(rows)))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {"header": header, "args": {k: str(v) if isinstance(v, pathlib.Path) else v for k, v in vars(args).items()},
             "rows": rows}, indent=1))
    return rows


def header_lines(args: argparse.Namespace, n: int, sizes: dict[str, int], s3_shards: dict[str, int],
                 epoch_records: int, epoch_bytes: int, envs: dict[str, _peer_envs.PeerEnv],
                 versions: dict[str, str], load: float, seconds: float, argv: list[str] | None) -> list[str]:
    """What was run, on what, with which command."""
    peers = []
    if "bagz" in versions:
        peers.append(f"bagz {versions['bagz']} (Python {envs['bagz'].python_version})")
    if "upstream" in versions:
        peers.append(f"upstream sackli {versions['upstream']} (Python {envs['upstream'].python_version})")
    command = "python benchmarks/remote_peers.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    return [
        f"# {n:,} records of {args.min_size:,}-{args.max_size:,} B (.bag {sizes['.bag'] / 1e6:.1f} MB, "
        f".bagz {sizes['.bagz'] / 1e6:.1f} MB); singles={args.singles}, batch={args.batch}, epoch = a "
        f"permutation of the first {epoch_records:,} records ({epoch_bytes / 1e6:.1f} MB of records); "
        f"medians of {args.repeat} runs, implementations alternating; every run opens a new Reader "
        f"(its time included)",
        f"# gs: fake-gcs-server, each object in a bucket of its own and the @16 set as a list of its "
        f"shards (fake-gcs-server ignores the matchGlob that bagz-gcs and upstream list with); s3: moto, "
        f"each file as shards of at most {args.s3_shard_mb:g} MB "
        f"(.bag @{s3_shards['.bag']}, .bagz @{s3_shards['.bagz']}: moto copies a whole object for every "
        f"ranged GET); direct: no proxy, no counts; +N ms: the tests' FaultProxy adds N ms per request and "
        f"counts requests (all kinds), GET MB (GET bodies) and max in flight (medians over the runs)",
        "# x local sackli: the median over local sackli's on the same file and workload; "
        "sackli / this: sackli's median over this one (above 1: faster than sackli)",
        f"# machine: {os.cpu_count()} cores, {platform.system()} {platform.release()}, load average "
        f"{load:.1f} at start; Python {platform.python_version()}, sackli-bagz {versions.get('sackli', '?')} "
        f"({pathlib.Path(sackli.__file__).parent}; tree {_git_head() or '?'}); "
        + ", ".join(peers + [f"moto {_version('moto')}"]),
        f"# command: {command.strip()}  ({seconds / 60:.1f} min)",
    ]


if __name__ == "__main__":
    main()
