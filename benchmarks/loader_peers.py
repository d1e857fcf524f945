"""sackli against the formats ML engineers load images from, on the same
images, in one run: ArrayRecord, TFRecord (tf.data), WebDataset and
MosaicML Streaming.

Makes `--records` small PNGs (random noise, 40-80 pixels a side, about
5-20 KiB) with an int label, and writes them in every format with that
format's own writer, in `--shards` shards (benchmarks/_loader_formats.py
says how each stores a sample). Then, medians of `--repeat` rounds, the
formats taking turns (the first one moves each round):

  epoch local    a shuffled full epoch from local disk, records/s: open,
                 read every sample (bytes and label, no image decode),
                 checksummed against the samples written;
  bucket cold    the same from a bucket: moto's S3 server on 127.0.0.1,
                 behind the tests' FaultProxy, which counts the requests.
                 Each format by its own documented remote path: sackli
                 `s3://` with `cache_dir=` an empty folder; WebDataset a
                 `pipe:aws s3 cp` URL per shard with `cache_dir=`; MosaicML
                 `remote=s3://...` with an empty `local=`; ArrayRecord and
                 TFRecord are tried on `s3://` paths and the row says what
                 they answered;
  bucket warm    the next epoch with that cache folder (cold then warm);
  random access  one record by index, `--singles` times, median and p99 in
                 microseconds (local; formats with random access only);
  resume         from restoring a mid-epoch position (half an epoch) to
                 the first record, milliseconds; the format's own resume
                 state where it has one, else the cost of getting there
                 (the row says which), and whether the record it gives is
                 the one an uninterrupted epoch gives there.

Each format runs in a worker process of its own (benchmarks/_peer_worker.py
in the peer's virtualenv, made once from PyPI with pinned versions by
benchmarks/_peer_envs.py; sackli in this interpreter). A peer that cannot
be installed, or a measurement it cannot make, gets "n/a: <why>".
The tables print ratios against sackli; `--charts DIR` draws
loader_throughput.png, loader_random_access.png and loader_resume.png
(benchmarks/_loader_charts.py, matplotlib).

    python benchmarks/loader_peers.py --quick                      # 1,000 images, 2 rounds: a smoke run
    python benchmarks/loader_peers.py --charts docs                # 4,000 images, 5 rounds: docs/loaders.md's run (~1 min)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import platform
import random
import re
import shlex
import signal
import statistics
import sys
import tempfile
import time
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # also under PYTHONSAFEPATH
import _peer_envs  # noqa: E402
from _loader_formats import FORMATS as SIDES, digest  # noqa: E402
from remote_peers import Worker, serve, worker_env  # noqa: E402

FORMATS = ("sackli", "arrayrecord", "tfrecord", "webdataset", "mosaicml")
LABELS = {"sackli": "sackli", "arrayrecord": "ArrayRecord", "tfrecord": "TFRecord (tf.data)",
          "webdataset": "WebDataset", "mosaicml": "MosaicML Streaming"}
MODULES = {"sackli": "sackli", "arrayrecord": "array_record", "tfrecord": "tensorflow",
           "webdataset": "webdataset", "mosaicml": "streaming"}
BUCKET = "sackli-bench-loaders"
EPOCHS = ("local", "bucket cold", "bucket warm")
QUICK = dict(records=1_000, repeat=2, singles=200)
FULL = dict(records=4_000, repeat=5, singles=1_000)


# --- the images -----------------------------------------------------------------

def make_samples(count: int, seed: int = 0) -> list[tuple[bytes, int]]:
    """`count` PNGs of RGB noise, 40-80 pixels a side (about 5-20 KiB),
    each with a label in [0, 1000)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(count):
        side = int(rng.integers(40, 81))
        pixels = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, format="PNG")
        samples.append((out.getvalue(), int(rng.integers(0, 1000))))
    return samples


def save_samples(samples: list[tuple[bytes, int]], source: pathlib.Path) -> None:
    """What the workers' writers read (see _loader_formats._samples)."""
    with open(f"{source}.bin", "wb") as data, open(f"{source}.txt", "w") as sizes:
        for image, label in samples:
            data.write(image)
            sizes.write(f"{len(image)} {label}\n")


# --- the run ----------------------------------------------------------------------

def _error(answer: dict[str, Any]) -> str:
    """A worker's error on one line, without TensorFlow's op-name prefix."""
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", str(answer.get("error", "")))
    return " ".join(text.split())[:240]


class Run:
    """The workers, the samples taken and the reasons for n/a."""

    def __init__(self, args: argparse.Namespace, folder: pathlib.Path, expected: tuple[int, int]) -> None:
        self.args, self.folder, self.expected = args, folder, expected
        self.workers: dict[str, Worker] = {}
        self.meta: dict[str, dict[str, Any]] = {}
        self.versions: dict[str, str] = {}
        self.write_seconds: dict[str, float] = {}
        self.epochs: dict[tuple[str, str], list[dict[str, float]]] = {}
        self.random: dict[str, list[float]] = {}
        self.resumes: dict[str, list[float]] = {}
        self.resume_how: dict[str, str] = {}
        self.resume_exact: dict[str, bool] = {}
        self.na: dict[tuple[str, str], str] = {}  # (format, measurement) -> why

    def ask(self, name: str, request: dict[str, Any]) -> dict[str, Any]:
        return self.workers[name].run({"format": name, **request}, self.args.timeout)

    def epoch(self, name: str, kind: str, where: dict[str, Any], seed: int, proxy: Any) -> None:
        """One shuffled epoch of `name` from `where`, filed under `kind`."""
        if (name, kind) in self.na:
            return
        if proxy is not None:
            proxy.reset_counts()
        answer = self.ask(name, {"loader": "epoch", "where": where, "meta": self.meta[name], "seed": seed})
        if "error" in answer:
            self.na[(name, kind)] = f"n/a: {_error(answer)}"
            return
        if (answer["checksum"], answer["records"]) != self.expected:
            self.na[(name, kind)] = (f"failed: {answer['records']:,} records read, not the "
                                     f"{self.expected[1]:,} written (or other bytes)")
            return
        sample = {"seconds": answer["seconds"], "first": answer["first_seconds"]}
        if proxy is not None:
            sample["requests"] = sum(proxy.counts.values())
        self.epochs.setdefault((name, kind), []).append(sample)


def start_workers(run: Run, pythons: dict[str, str], endpoint: str, log) -> None:
    (run.folder / "tmp").mkdir(exist_ok=True)
    for name in FORMATS:
        if name not in pythons:
            continue
        env = worker_env("sackli", "s3", endpoint)
        env["S3_ENDPOINT_URL"] = endpoint  # MosaicML Streaming's endpoint override
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        # The peers' own temporary files (MosaicML's file locks) go with the run's folder.
        env["TMPDIR"] = str(run.folder / "tmp")
        worker = Worker(pythons[name], MODULES[name], env, run.folder / f"worker-{name}.log")
        if "error" in worker.hello:
            for measurement in ("write", *EPOCHS, "random", "resume"):
                run.na[(name, measurement)] = f"n/a: the worker did not start: {_error(worker.hello)}"
            continue
        run.workers[name] = worker
        run.versions[name] = worker.hello.get("version", "?")
        log(f"# {name}: {run.versions[name]} ({pythons[name]})")


def write_all(run: Run, source: pathlib.Path, log) -> None:
    for name in list(run.workers):
        folder = run.folder / "data" / name
        folder.mkdir(parents=True)
        answer = run.ask(name, {"loader": "write", "source": str(source), "folder": str(folder),
                                "shards": run.args.shards})
        if "error" in answer:
            for measurement in ("write", *EPOCHS, "random", "resume"):
                run.na[(name, measurement)] = f"n/a: writing failed: {_error(answer)}"
            run.workers.pop(name).close()
            continue
        run.meta[name] = answer["meta"]
        run.write_seconds[name] = answer["seconds"]
        size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
        run.meta[name]["bytes"] = size
        log(f"# wrote {name}: {answer['meta']['shards']} shards, {size / 1e6:.1f} MB in {answer['seconds']:.1f} s")


def upload_all(run: Run, server_url: str) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=server_url, region_name="us-east-1",
                          aws_access_key_id="bench", aws_secret_access_key="bench")
    client.create_bucket(Bucket=BUCKET)
    for name in run.workers:
        folder = run.folder / "data" / name
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                client.upload_file(str(path), BUCKET, f"{name}/{path.relative_to(folder)}")


def one_round(run: Run, order: list[str], number: int, proxy: Any, indices: list[int], log) -> None:
    """Every measurement of every format once, the formats in `order`."""
    for name in order:
        if name not in run.workers:
            continue
        local = {"local": str(run.folder / "data" / name)}
        run.epoch(name, "local", local, number, None)
        cache = run.folder / f"cache-{name}-{number}"
        cache.mkdir()
        remote = {"remote": f"s3://{BUCKET}/{name}", "cache": str(cache)}
        run.epoch(name, "bucket cold", remote, number, proxy)
        if (name, "bucket cold") in run.na:
            run.na[(name, "bucket warm")] = run.na[(name, "bucket cold")]
        run.epoch(name, "bucket warm", remote, number + 1000, proxy)
        if (name, "random") not in run.na:
            answer = run.ask(name, {"loader": "random", "where": local, "meta": run.meta[name],
                                    "indices": indices})
            if "error" in answer:
                run.na[(name, "random")] = f"n/a: {_error(answer)}"
            elif answer["checks"] != [run.expected_singles[i] for i in indices]:
                run.na[(name, "random")] = "failed: a record read by index is not the one written there"
            else:
                run.random.setdefault(name, []).extend(answer["micros"])
        if (name, "resume") not in run.na:
            scratch = run.folder / f"scratch-{name}-{number}"
            scratch.mkdir()
            answer = run.ask(name, {"loader": "resume", "where": local, "meta": run.meta[name],
                                    "seed": number, "position": run.args.records // 2,
                                    "scratch": str(scratch)})
            if "error" in answer:
                run.na[(name, "resume")] = f"n/a: {_error(answer)}"
            else:
                run.resumes.setdefault(name, []).append(answer["seconds"])
                run.resume_how[name] = answer["how"]
                run.resume_exact[name] = run.resume_exact.get(name, True) and answer["exact"]
    log(f"# round {number + 1} of {run.args.repeat} done")


# --- the results --------------------------------------------------------------------

def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def results(run: Run) -> dict[str, Any]:
    """What the tables and charts show: per format, records/s per epoch kind
    (with requests), random access µs, resume ms, or the reason for n/a."""
    n = run.expected[1]
    out: dict[str, Any] = {"records": n, "formats": {}}
    for name in FORMATS:
        row: dict[str, Any] = {"label": LABELS[name], "version": run.versions.get(name, ""),
                               "shards": run.meta.get(name, {}).get("shards"),
                               "bytes": run.meta.get(name, {}).get("bytes"),
                               "write_s": run.write_seconds.get(name), "na": {}}
        for kind in EPOCHS:
            samples = run.epochs.get((name, kind))
            if samples:
                seconds = statistics.median(s["seconds"] for s in samples)
                row[kind] = {"records_per_s": n / seconds, "runs": len(samples),
                             "first_ms": statistics.median(s["first"] for s in samples) * 1000,
                             "requests": (statistics.median(s["requests"] for s in samples)
                                          if "requests" in samples[0] else None)}
            else:
                row["na"][kind] = run.na.get((name, kind), "n/a: not run")
        if run.random.get(name):
            row["random"] = {"median_us": statistics.median(run.random[name]),
                             "p99_us": _percentile(run.random[name], 0.99), "reads": len(run.random[name])}
        else:
            row["na"]["random"] = run.na.get((name, "random"), "n/a: not run")
        if run.resumes.get(name):
            row["resume"] = {"ms": statistics.median(run.resumes[name]) * 1000, "how": run.resume_how[name],
                             "exact": run.resume_exact[name]}
        else:
            row["na"]["resume"] = run.na.get((name, "resume"), "n/a: not run")
        out["formats"][name] = row
    return out


def _ratio(value: float | None, reference: float | None) -> str:
    return f"{value / reference:.2f}" if value and reference else "-"


def tables(result: dict[str, Any]) -> list[str]:
    """The three markdown tables; "x sackli": this format over sackli (for
    records/s above 1 is faster than sackli, for times above 1 is slower)."""
    rows = result["formats"]
    sackli = rows["sackli"]
    lines = ["| format | epoch | records/s | x sackli | first record ms | requests | note |",
             "|---|---|--:|--:|--:|--:|---|"]
    for name, row in rows.items():
        for kind in EPOCHS:
            if kind in row:
                value = row[kind]["records_per_s"]
                reference = sackli.get(kind, {}).get("records_per_s")
                requests = row[kind]["requests"]
                lines.append(f"| {row['label']} | {kind} | {value:,.0f} | {_ratio(value, reference)} | "
                             f"{row[kind]['first_ms']:,.1f} | "
                             f"{'-' if requests is None else f'{requests:,.0f}'} | |")
            else:
                lines.append(f"| {row['label']} | {kind} | - | - | - | - | {row['na'][kind]} |")
    lines += ["", "| format | median µs | p99 µs | median x sackli | note |", "|---|--:|--:|--:|---|"]
    for name, row in rows.items():
        if "random" in row:
            value = row["random"]
            lines.append(f"| {row['label']} | {value['median_us']:,.1f} | {value['p99_us']:,.1f} | "
                         f"{_ratio(value['median_us'], sackli.get('random', {}).get('median_us'))} | |")
        else:
            lines.append(f"| {row['label']} | - | - | - | {row['na']['random']} |")
    lines += ["", "| format | resume ms | x sackli | exact | how |", "|---|--:|--:|---|---|"]
    for name, row in rows.items():
        if "resume" in row:
            value = row["resume"]
            lines.append(f"| {row['label']} | {value['ms']:,.1f} | "
                         f"{_ratio(value['ms'], sackli.get('resume', {}).get('ms'))} | "
                         f"{'yes' if value['exact'] else 'no'} | {value['how']} |")
        else:
            lines.append(f"| {row['label']} | - | - | - | {row['na']['resume']} |")
    return lines


def header(args: argparse.Namespace, result: dict[str, Any], image_bytes: int, seconds: float,
           argv: list[str] | None, load: float = 0.0) -> list[str]:
    rows = result["formats"]
    versions = ", ".join(f"{row['label']} {row['version']}" for row in rows.values() if row["version"])
    stored = ", ".join(f"{row['label']} {row['shards']} shards / {row['bytes'] / 1e6:.1f} MB"
                       for row in rows.values() if row["bytes"])
    command = "python benchmarks/loader_peers.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    return [
        f"# {result['records']:,} PNG images of noise ({image_bytes / result['records'] / 1024:.1f} KiB on "
        f"average, {image_bytes / 1e6:.1f} MB) with an int label; medians of {args.repeat} rounds, formats "
        f"taking turns; epochs shuffled, bytes only (no decode); random access: {args.singles:,} reads by "
        f"index per round, local; resume: at record {args.records // 2:,} of the epoch, local",
        f"# stored: {stored}",
        f"# bucket: moto's S3 server on 127.0.0.1 behind the tests' FaultProxy (no added latency); "
        f"requests: all kinds, median per epoch",
        f"# versions: {versions}",
        f"# machine: {os.cpu_count()} cores, {platform.system()} {platform.release()}, load average "
        f"{load:.1f} at start (other work shares the machine); Python {platform.python_version()}",
        f"# command: {command.strip()}  ({seconds / 60:.1f} min)",
    ]


# --- main ------------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,000 images, 2 rounds, 200 reads by index")
    parser.add_argument("--records", type=int, help="images (default 4,000; --quick 1,000)")
    parser.add_argument("--shards", type=int, default=8, help="shards of every sharded format")
    parser.add_argument("--repeat", type=int, help="rounds, medians taken (default 5; --quick 2)")
    parser.add_argument("--singles", type=int, help="reads by index per round (default 1,000; --quick 200)")
    parser.add_argument("--only", help="comma-separated formats (sackli always runs), of " + ", ".join(FORMATS))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one request may take")
    parser.add_argument("--peers-dir", type=pathlib.Path, default=_peer_envs.default_root(),
                        help="where the peers' virtualenvs are made and reused (default %(default)s)")
    parser.add_argument("--charts", metavar="DIR", help="draw loader_*.png into DIR")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    for option, value in (QUICK if args.quick else FULL).items():
        if getattr(args, option) is None:
            setattr(args, option, value)
    if min(args.records, args.shards, args.repeat, args.singles) < 1:
        parser.error("--records, --shards, --repeat and --singles must be at least 1")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        return run_benchmark(argv)
    finally:
        Worker.kill_all()


def run_benchmark(argv: list[str] | None) -> dict[str, Any]:
    args = parse_args(argv)
    began = time.perf_counter()
    load = os.getloadavg()[0]

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    chosen = {"sackli", *(args.only.split(",") if args.only else FORMATS)}
    unknown = chosen - set(FORMATS)
    if unknown:
        raise SystemExit(f"--only: unknown formats {sorted(unknown)}; choose from {', '.join(FORMATS)}")
    pythons, missing = {"sackli": sys.executable}, {}
    for name in FORMATS[1:]:
        if name in chosen:
            env = _peer_envs.ensure(_peer_envs.PEERS[name], args.peers_dir, None, log)
            if env.python:
                pythons[name] = env.python
            else:
                missing[name] = f"n/a: not installed: {env.reason}"

    samples = make_samples(args.records)
    image_bytes = sum(len(image) for image, _ in samples)
    expected = digest(iter(samples))
    with tempfile.TemporaryDirectory(prefix="sackli-bench-loaders-") as temporary:
        folder = pathlib.Path(temporary)
        source = folder / "samples"
        save_samples(samples, source)
        run = Run(args, folder, expected)
        run.expected_singles = [digest(iter([sample]))[0] for sample in samples]
        for name, why in missing.items():
            for measurement in ("write", *EPOCHS, "random", "resume"):
                run.na[(name, measurement)] = why
        for name in FORMATS:
            if name not in chosen:
                for measurement in ("write", *EPOCHS, "random", "resume"):
                    run.na[(name, measurement)] = "n/a: not chosen (--only)"
        del samples
        rng = random.Random(7)
        indices = [rng.randrange(args.records) for _ in range(args.singles)]
        with serve(["s3"]) as stores:
            store = stores["s3"]
            start_workers(run, pythons, store.proxy.url, log)
            write_all(run, source, log)
            upload_all(run, store.server.url)
            log(f"# uploaded to s3://{BUCKET}")
            for name in FORMATS:
                if name in run.workers and not SIDES[name].random_access:
                    run.na[(name, "random")] = f"n/a: {LABELS[name]} reads records in order only"
            order = [name for name in FORMATS if name in run.workers]
            for number in range(args.repeat):
                shift = number % len(order)
                one_round(run, order[shift:] + order[:shift], number, store.proxy, indices, log)
            for worker in list(run.workers.values()):
                worker.close()
    result = results(run)
    lines = header(args, result, image_bytes, time.perf_counter() - began, argv, load)
    print("\n".join(lines + [""] + tables(result)))
    result["header"] = lines
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=1))
    if args.charts:
        import _loader_charts

        for path in _loader_charts.render_all(result, pathlib.Path(args.charts)):
            log(f"# drew {path}")
    return result


if __name__ == "__main__":
    main()
