"""Writer memory and time, sackli vs. bagz: peak memory of writing `.bagz`
records of 1 KiB, 1 MiB, 64 MiB and 1 GiB (issue 49).

Every case runs in a subprocess of its own, so each peak is that write's
alone. The subprocess makes its record (half random bytes, half a repeated
phrase: zstd level 3 halves it), resets the kernel's peak-RSS mark
(/proc/self/clear_refs), then writes the record `count` times with one
`write()` per record and closes the writer. "peak MiB" is the subprocess's
VmHWM during the write, "extra MiB" that minus its RSS just before (what the
writer held: copies, compressed output, buffers), "x record" the extra over
one record's size; "median CPU" the subprocess's user and system time during
the write (all threads): on a loaded machine it moves less than the time.

bagz 0.3.8 has no `max_parallelism` (its writer compresses on the calling
thread), so it runs once per record size and every sackli row of that size
is compared with it: "time ratio" is sackli's median time over bagz's (at
most 1: sackli is as fast or faster), "CPU ratio" the same of CPU time,
"memory ratio" sackli's median extra over bagz's. "zstd alone" compresses
the same records one-shot on one thread with no file and no writer (sackli's
Encode, into a buffer of zstd's bound that it zero-fills first): about the
floor of any writer that must make bagz's frames (multithreaded zstd makes
other frames). Medians over `--repeat` runs, sackli and bagz alternating.

Commands (from the repository root):

    python benchmarks/write_memory.py --quick          # 1 KiB .. 64 MiB, small counts, 1 run each
    python benchmarks/write_memory.py --repeat 3       # every size, 1 GiB included
    python benchmarks/write_memory.py --json out.json

Files go to a temporary folder (`--folder`) and are deleted after each run:
the 1 GiB case needs about 0.6 GB of disk and 3 GB of memory (the record,
and its making).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import random
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
# record size: how many records a case writes (full, quick)
COUNTS = {KIB: (65536, 4096), MIB: (256, 16), 64 * MIB: (8, 2), GIB: (1, 0)}
SIZE_NAMES = {KIB: "1 KiB", MIB: "1 MiB", 64 * MIB: "64 MiB", GIB: "1 GiB"}
PARALLELISM = (1, 2, 8)
ZSTD_LEVEL = 3


def make_record(size: int) -> bytes:
    """Half random bytes, half a repeated phrase (deterministic). The random
    half repeats an 8 MiB block: farther apart than zstd level 3's window
    (2 MiB), so it compresses as random bytes do."""
    half = size // 2
    block = random.Random(size).randbytes(min(half, 8 * MIB))
    phrase = b"sackli writes bagz records "
    random_half = (block * (half // len(block) + 1))[:half] if block else b""
    return random_half + (phrase * ((size - half) // len(phrase) + 1))[: size - half]


def _cpu_seconds() -> float:
    """User and system time of this process (every thread) so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _zstd_alone(record: bytes, count: int) -> dict[str, Any]:
    """The floor: zstd compressing the records one-shot on one thread, no
    file, no writer (sackli's engine call that sizes packed records)."""
    import array

    from sackli import _engine
    offsets = array.array("q", [0, len(record)])
    cpu = _cpu_seconds()
    began = time.perf_counter()
    for _ in range(count):
        _engine.zstd_packed_size(record, offsets, ZSTD_LEVEL, False)
    return {"seconds": time.perf_counter() - began, "cpu_seconds": _cpu_seconds() - cpu, "peak_kib": 0,
            "before_kib": 0, "file_bytes": 0}


def child(lib: str, size: int, count: int, parallelism: int, path: str) -> dict[str, Any]:
    """One write, in this process: its time and memory."""
    record = make_record(size)
    if lib == "sackli":
        import sackli

        def open_writer() -> Any:
            return sackli.Writer(path, compression=sackli.CompressionZstd(level=ZSTD_LEVEL),
                                 max_parallelism=parallelism)
    elif lib == "zstd":
        return _zstd_alone(record, count)
    else:
        import bagz

        def open_writer() -> Any:
            return bagz.Writer(path, bagz.Writer.Options(compression=bagz.CompressionZstd(level=ZSTD_LEVEL)))
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # VmHWM := VmRSS: the peak from here on
    before = _status_kib("VmRSS")
    cpu = _cpu_seconds()
    began = time.perf_counter()
    with open_writer() as writer:
        for _ in range(count):
            writer.write(record)
    seconds = time.perf_counter() - began
    cpu = _cpu_seconds() - cpu
    peak = _status_kib("VmHWM")
    file_bytes = os.path.getsize(path)
    os.remove(path)
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_kib": peak, "before_kib": before,
            "file_bytes": file_bytes}


def run_case(lib: str, size: int, count: int, parallelism: int, folder: str) -> dict[str, Any]:
    path = os.path.join(folder, f"{lib}-{size}-{parallelism}.bagz")
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", lib, str(size), str(count), str(parallelism), path],
        capture_output=True, text=True)
    if os.path.exists(path):
        os.remove(path)
    if done.returncode != 0:
        raise RuntimeError(f"{lib} {size} B x {count} @{parallelism} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _median(runs: list[dict[str, Any]], key: Any) -> float:
    return statistics.median(key(run) for run in runs)


def summary(lib: str, size: int, count: int, parallelism: int | None, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "library": lib, "record_bytes": size, "records": count, "max_parallelism": parallelism,
        "runs": len(runs), "seconds": _median(runs, lambda r: r["seconds"]),
        "cpu_seconds": _median(runs, lambda r: r["cpu_seconds"]),
        "peak_mib": _median(runs, lambda r: r["peak_kib"] / 1024),
        "extra_mib": _median(runs, lambda r: (r["peak_kib"] - r["before_kib"]) / 1024),
        "file_bytes": runs[0]["file_bytes"],
    }


def _fmt_seconds(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _fmt_times(ratio: float) -> str:
    return f"{ratio:.2f}" if ratio < 10 else f"{ratio:,.0f}"


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| record | records | writer | max_parallelism | median time | median CPU | peak MiB | extra MiB "
             "| x record | time ratio | CPU ratio | memory ratio |",
             "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    bagz_rows = {row["record_bytes"]: row for row in rows if row["library"] == "bagz"}
    for row in rows:
        base = bagz_rows.get(row["record_bytes"])
        ratios = ["–", "–", "–"]
        if row["library"] == "sackli" and base:
            ratios = [f"{row['seconds'] / base['seconds']:.2f}x", f"{row['cpu_seconds'] / base['cpu_seconds']:.2f}x",
                      f"{row['extra_mib'] / base['extra_mib']:.2f}x" if base["extra_mib"] > 0 else "–"]
        if row["library"] == "zstd":
            lines.append(f"| {SIZE_NAMES[row['record_bytes']]} | {row['records']:,} | zstd alone (floor) | 1 | "
                         f"{_fmt_seconds(row['seconds'])} | {_fmt_seconds(row['cpu_seconds'])} | – | – | – | "
                         f"{row['seconds'] / base['seconds']:.2f}x | {row['cpu_seconds'] / base['cpu_seconds']:.2f}x "
                         f"| – |" if base else "")
            continue
        lines.append(
            f"| {SIZE_NAMES[row['record_bytes']]} | {row['records']:,} | {row['library']} | "
            f"{row['max_parallelism'] or '–'} | {_fmt_seconds(row['seconds'])} | "
            f"{_fmt_seconds(row['cpu_seconds'])} | {row['peak_mib']:.0f} | "
            f"{row['extra_mib']:.0f} | {_fmt_times(row['extra_mib'] * MIB / row['record_bytes'])} | "
            + " | ".join(ratios) + " |")
    return lines


def header_lines(args: argparse.Namespace, load: float, seconds: float) -> list[str]:
    import sackli
    command = "python benchmarks/write_memory.py " + shlex.join(sys.argv[1:])
    return [
        f"# .bagz, zstd level {ZSTD_LEVEL}, one write() per record, each case in its own subprocess; "
        f"medians of {args.repeat} runs, sackli and bagz alternating; extra = peak RSS during the write "
        f"minus RSS before it; time and memory ratios: sackli's median over bagz's",
        f"# machine: {os.cpu_count()} cores, {platform.system()} {platform.release()}, load average "
        f"{load:.1f} at start; Python {platform.python_version()}, sackli-bagz "
        f"{importlib.metadata.version('sackli-bagz')} ({os.path.dirname(sackli.__file__)}), "
        f"bagz {importlib.metadata.version('bagz')}",
        f"# command: {command.strip()}  ({seconds / 60:.1f} min)",
    ]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 KiB to 64 MiB, few records, 1 run (about a minute)")
    parser.add_argument("--repeat", type=int, help="runs per case (default 3; 1 with --quick)")
    parser.add_argument("--sizes", help="record sizes to run, comma-separated from 1KiB,1MiB,64MiB,1GiB")
    parser.add_argument("--parallelism", default=",".join(map(str, PARALLELISM)),
                        help="sackli's max_parallelism values, comma-separated (default 1,2,8)")
    parser.add_argument("--records", type=int, help="records per case instead of the defaults (for a tiny run)")
    parser.add_argument("--folder", help="where the files are written (default: a temporary folder)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--child", nargs=5, metavar=("LIB", "SIZE", "COUNT", "P", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        lib, size, count, parallelism, path = args.child
        print(json.dumps(child(lib, int(size), int(count), int(parallelism), path)))
        return []
    args.repeat = args.repeat or (1 if args.quick else 3)
    names = {name.replace(" ", ""): size for size, name in SIZE_NAMES.items()}
    sizes = [names[s.strip()] for s in args.sizes.split(",")] if args.sizes else list(SIZE_NAMES)
    parallelisms = [int(p) for p in args.parallelism.split(",")]
    load = os.getloadavg()[0]
    began = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        for size in sizes:
            count = args.records or COUNTS[size][1 if args.quick else 0]
            if count == 0:
                continue  # --quick leaves out 1 GiB
            runs: dict[Any, list[dict[str, Any]]] = {}
            for rep in range(args.repeat):
                cases = [("bagz", 1)] + [("sackli", p) for p in parallelisms] + [("zstd", 1)]
                for lib, p in (cases if rep % 2 == 0 else cases[::-1]):
                    runs.setdefault((lib, p), []).append(run_case(lib, size, count, p, folder))
            rows.append(summary("bagz", size, count, None, runs[("bagz", 1)]))
            rows += [summary("sackli", size, count, p, runs[("sackli", p)]) for p in parallelisms]
            rows.append(summary("zstd", size, count, None, runs[("zstd", 1)]))
    header = header_lines(args, load, time.perf_counter() - began)
    print("\n".join(header + [""] + markdown(rows)))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"header": header, "args": vars(args), "rows": rows}, out, indent=1)
    return rows


if __name__ == "__main__":
    main()
