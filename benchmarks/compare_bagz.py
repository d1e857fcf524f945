"""sackli vs. bagz (and a C++ ceiling) on the same data, in the same process.

Generates deterministic data, then runs every workload for sackli and for
bagz in turn (alternating which goes first), `--repeat` times, with the page
cache warm. The table shows the median time of each; the speed-up of sackli,
"bagz/sackli": bagz's median time over sackli's (above 1 means sackli is
faster), which a reader can check against the two times; "per rep.": the
median of the per-repetition ratios bagz time / sackli time (when the two
differ much, the workload's times vary from run to run); and a "ceiling":
`benchmarks/ceiling.cc`, compiled at run time, which does the same I/O and
decompression in C++ without Python objects (mmap, parse the limits, memcpy
or ZSTD_decompressDCtx each record into a reused buffer; one thread for
per-record loops, one per core for batch reads). "bagz/ceiling" is bagz's
median over the ceiling's median; a "†" marks a ceiling whose median is
above sackli's (it measured slower there, so it is no bound in that row).
`r[i]` on a `.bag` is also timed with an anchor, a pure-Python reader
(`PurePythonMmap`: mmap, struct, memoryview slicing): the line shows its
time, the median of the per-repetition ratios pymmap time / sackli time
(above 1: sackli is faster) and sackli's share of the ceiling (ceiling
time / sackli time), and of the ceiling run `serial` (x86-64: each record's
loads finish before the next record starts, as they must between two calls
from Python; see ceiling.cc); the table after the main one repeats them.

Datasets (each as .bag and as .bagz, zstd level 3):
  1 KiB records: 200,000; 20,000 random reads; 200 slices of 1,000 records;
                 Index / MultiIndex over all records, 20,000 lookups.
  1 MiB records: 2,000; scaled down to 2,000 random reads (2 GiB) and
                 20 slices of 100 records; no Index workloads.
Both also as a set of 8 shards (`@8`), read with both sharding layouts.

Commands (from the repository root):

    python benchmarks/compare_bagz.py --quick             # 1/10 of the data, 3 repetitions, < 2 min
    python benchmarks/compare_bagz.py                     # full, 5 repetitions; writes docs/benchmark_bagz.png
    python benchmarks/compare_bagz.py --json out.json --chart out.png

zstd checksums (sackli writes them by default; bagz does not): the read
workloads' files are written by bagz, without them. To measure what they
cost, compare a run with `--no-checksum` (sackli writes frames without one,
as before) against one with `--checksummed-data` (the read files written by
sackli, each frame with its checksum, which both libraries verify):

    python benchmarks/compare_bagz.py --quick --only write_many --no-checksum
    python benchmarks/compare_bagz.py --quick --only write_many --checksummed-data

Needs g++ and gcc for the ceiling, which compiles in third_party/zstd as
sackli does (libzstd-dev only for a sackli built with SACKLI_SYSTEM_ZSTD;
`--no-ceiling` skips it), and
matplotlib for the chart (`pip install matplotlib`).
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import gc
import importlib.metadata
import json
import mmap
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Iterable

# numpy's OpenBLAS threads spin after a call and took 6-10% of the samples
# in profiles of this run: one thread, fair to both libraries.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import bagz  # noqa: E402  (after the environment above)
import numpy as np  # noqa: E402

import sackli

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CHART = os.path.join(os.path.dirname(HERE), "docs", "benchmark_bagz.png")
SHARDS = 8
ZSTD_LEVEL = 3
# Whether sackli writes zstd checksums (--no-checksum), and whether the read
# workloads' files are sackli's, with checksums, instead of bagz's
# (--checksummed-data): set once by main().
CHECKSUMS = {"write": True, "read_data": False}
OPENS = 100  # readers opened per repetition of "open reader"
# zstd as sackli compiles it in; the ceiling uses it too, compiled once into
# ZSTD_OBJECT.
ZSTD_SOURCE = os.path.join(os.path.dirname(HERE), "third_party", "zstd")
ZSTD_OBJECT = os.path.join(os.path.dirname(HERE), "build", "ceiling", "zstd.o")


# --- Libraries: one adapter each, so that workloads call the same API ------


class Sackli:
    name = "sackli"
    Index = sackli.Index
    MultiIndex = sackli.MultiIndex

    @staticmethod
    def writer_options(path: str) -> sackli.Writer.Options:
        compressed = path.endswith(".bagz")
        return sackli.Writer.Options(compression=sackli.CompressionZstd(level=ZSTD_LEVEL)
                                     if compressed else sackli.CompressionNone(),
                                     checksum=CHECKSUMS["write"])

    @staticmethod
    def writer(path: str) -> Any:
        return sackli.Writer(path, Sackli.writer_options(path))

    @staticmethod
    def write_many(writer: Any, records: list[bytes]) -> None:
        writer.write_many(records)

    @staticmethod
    def reader(spec: str, interleaved: bool = False) -> Any:
        layout = sackli.ShardingLayout.INTERLEAVED if interleaved else sackli.ShardingLayout.CONCATENATED
        return sackli.Reader(spec, sharding_layout=layout)


class Bagz:
    name = "bagz"
    Index = bagz.Index
    MultiIndex = bagz.MultiIndex

    @staticmethod
    def writer(path: str) -> Any:
        compressed = path.endswith(".bagz")
        compression = bagz.CompressionZstd(level=ZSTD_LEVEL) if compressed else bagz.CompressionNone()
        return bagz.Writer(path, bagz.Writer.Options(compression=compression))

    @staticmethod
    def write_many(writer: Any, records: list[bytes]) -> None:
        for record in records:  # bagz has no write_many: the loop is its way
            writer.write(record)

    @staticmethod
    def reader(spec: str, interleaved: bool = False) -> Any:
        layout = bagz.ShardingLayout.INTERLEAVED if interleaved else bagz.ShardingLayout.CONCATENATED
        return bagz.Reader(spec, bagz.Reader.Options(sharding_layout=layout))


LIBRARIES = (Sackli, Bagz)


class PurePythonMmap:
    """An anchor for `r[i]` on a `.bag`: the simplest reader Python allows,
    with no engine at all. It maps the file, finds the limits from the
    trailer (the last 8 bytes: where the limits start) with struct, reads
    them as a memoryview of uint64 (which checks the index), and slices the
    record's bytes out of the mapping. No sharding, compression or checks
    of the limits: a floor for what a call from Python costs, not a
    library."""

    name = "pymmap"

    class Reader:
        def __init__(self, path: str) -> None:
            with open(path, "rb") as file:
                self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
            (limits_start,) = struct.unpack_from("<Q", self._map, len(self._map) - 8)
            self._limits = memoryview(self._map)[limits_start:len(self._map)].cast("Q")

        def __getitem__(self, i: int) -> bytes:
            end = self._limits[i]
            return self._map[self._limits[i - 1] if i else 0:end]

    @staticmethod
    def reader(spec: str, interleaved: bool = False) -> Any:
        return PurePythonMmap.Reader(spec)


# --- Data -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Scale:
    """One record size and the workload counts used with it."""

    label: str
    records: int
    size: int
    reads: int  # random indices for r[i], read_indices, read_indices_iter
    slices: int  # random slices r[a:a + slice_len].read()
    slice_len: int
    lookups: int  # Index / MultiIndex lookups; 0: no Index workloads


FULL = (
    Scale("1 KiB", 200_000, 1024, reads=20_000, slices=200, slice_len=1_000, lookups=20_000),
    Scale("1 MiB", 2_000, 1 << 20, reads=2_000, slices=20, slice_len=100, lookups=0),
)
QUICK = (
    Scale("1 KiB", 20_000, 1024, reads=2_000, slices=20, slice_len=1_000, lookups=2_000),
    Scale("1 MiB", 200, 1 << 20, reads=200, slices=2, slice_len=100, lookups=0),
)


def make_records(count: int, size: int, seed: int = 0) -> list[bytes]:
    """Moderately compressible records (zstd level 3: 1.9x for 1 KiB, 3.2x
    for 1 MiB records): slices at random offsets of a text of random words
    from a 512-word vocabulary. A few records repeat, so MultiIndex lookups
    sometimes find several."""
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"abcdefghijklmnop", np.uint8)
    vocabulary = [rng.choice(letters, rng.integers(2, 10)).tobytes() + b" " for _ in range(512)]
    words = rng.integers(0, len(vocabulary), max(4 * size, 1 << 24) // 5)
    text = b"".join(vocabulary[w] for w in words.tolist())
    return [text[start:start + size] for start in rng.integers(0, len(text) - size, count).tolist()]


@dataclasses.dataclass
class Data:
    """One dataset on disk (one scale, one suffix) and the inputs of its workloads."""

    scale: Scale
    suffix: str  # ".bag" or ".bagz"
    folder: str
    records: list[bytes]
    indices: list[int]
    index_array: np.ndarray  # the same indices
    slice_starts: list[int]
    keys: list[bytes]

    @property
    def path(self) -> str:
        return os.path.join(self.folder, "data" + self.suffix)

    @property
    def shard_spec(self) -> str:
        return os.path.join(self.folder, f"shards@{SHARDS}{self.suffix}")

    def out_path(self, lib: Any) -> str:
        return os.path.join(self.folder, f"out-{lib.name}{self.suffix}")

    def slice_indices(self) -> list[int]:
        return [i for a in self.slice_starts for i in range(a, a + self.scale.slice_len)]


def write_with(lib: Any, path: str, records: Iterable[bytes]) -> None:
    with lib.writer(path) as writer:
        for record in records:
            writer.write(record)


def prepare_data(scale: Scale, suffix: str, folder: str, records: list[bytes]) -> Data:
    """Writes the bag and its @8 shard set with bagz (with sackli, and zstd
    checksums, under --checksummed-data) and picks the inputs."""
    writer = Sackli if CHECKSUMS["read_data"] else Bagz
    rng = np.random.default_rng(1)
    indices = rng.integers(0, scale.records, scale.reads).tolist()
    data = Data(scale, suffix, folder, records, indices, np.array(indices, dtype=np.int64),
                slice_starts=rng.integers(0, scale.records - scale.slice_len + 1, scale.slices).tolist(),
                keys=[records[i] for i in rng.integers(0, scale.records, scale.lookups).tolist()])
    write_with(writer, data.path, records)
    per_shard = -(-len(records) // SHARDS)
    for shard in range(SHARDS):
        name = f"shards-{shard:05d}-of-{SHARDS:05d}{suffix}"
        write_with(writer, os.path.join(folder, name), records[shard * per_shard:(shard + 1) * per_shard])
    return data


# --- Workloads ----------------------------------------------------------------
#
# A workload's `prepare(lib, data)` does the untimed setup (opening a reader,
# building an index) and returns the timed call. `ceiling(data)` says what
# the C++ ceiling does for it: ("open",) or ("read", indices, threads).


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str  # formatted with the Scale's fields
    prepare: Callable[[Any, Data], Callable[[], Any]]
    ceiling: Callable[[Data], tuple] | None = None
    needs_index: bool = False  # only for scales with lookups
    # Also timed with the pure-Python mmap reader, on .bag files.
    anchored: bool = False


def write_loop(lib: Any, data: Data) -> Callable[[], Any]:
    return lambda: write_with(lib, data.out_path(lib), data.records)


def write_many(lib: Any, data: Data) -> Callable[[], Any]:
    def run() -> None:
        with lib.writer(data.out_path(lib)) as writer:
            lib.write_many(writer, data.records)
    return run


def write_durable(lib: Any, data: Data) -> Callable[[], Any]:
    """write_many that survives power loss: sackli's durable=True (fsync
    before the rename, the folder after); bagz has no such option, so its
    file and folder are fsynced after close, the same guarantee."""
    def run() -> None:
        path = data.out_path(lib)
        if lib is Sackli:
            options = dataclasses.replace(lib.writer_options(path), durable=True)
            with sackli.Writer(path, options) as writer:
                writer.write_many(data.records)
            return
        with lib.writer(path) as writer:
            lib.write_many(writer, data.records)
        for name in (path, os.path.dirname(path)):
            fd = os.open(name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    return run


def on_reader(action: Callable[[Any, Any, Data], Any], layout: str | None = None) -> Callable[..., Any]:
    """A workload's prepare: opens a reader of the bag (or, given a layout,
    of its shard set) untimed, then times `action(lib, reader, data)`."""
    def prepare(lib: Any, data: Data) -> Callable[[], Any]:
        reader = lib.reader(data.path) if layout is None else lib.reader(data.shard_spec, layout == "INTERLEAVED")
        return lambda: action(lib, reader, data)
    return prepare


def getitem_loop(lib: Any, reader: Any, data: Data) -> None:
    for i in data.indices:
        reader[i]


def read_slices(lib: Any, reader: Any, data: Data) -> list[list[bytes]]:
    length = data.scale.slice_len
    return [reader[a:a + length].read() for a in data.slice_starts]


def count(iterable: Iterable[Any]) -> int:
    return sum(1 for _ in iterable)


def lookups(index_type: str) -> Callable[[Any, Data], Callable[[], Any]]:
    """A workload's prepare: builds the index untimed, times the lookups."""
    def prepare(lib: Any, data: Data) -> Callable[[], Any]:
        index = getattr(lib, index_type)(lib.reader(data.path))
        return lambda: [index[key] for key in data.keys]
    return prepare


THREADS = os.cpu_count() or 1


def random_reads(threads: int) -> Callable[[Data], tuple]:
    return lambda data: ("read", data.indices, threads)


def all_records(data: Data) -> tuple:
    return ("read", list(range(data.scale.records)), THREADS)


def sharded_workloads() -> list[Workload]:
    return [Workload(f"@{SHARDS} {layout}: {name}", on_reader(action, layout))
            for layout in ("CONCATENATED", "INTERLEAVED")
            for name, action in (("read_indices, {reads:,} random", lambda lib, r, d: r.read_indices(d.indices)),
                                 ("iterate all", lambda lib, r, d: count(r)))]


WORKLOADS = (
    Workload("write: write() loop", write_loop),
    Workload("write: write_many (bagz: loop)", write_many),
    Workload("write: durable=True (bagz: loop, fsync)", write_durable),
    # One open takes microseconds, too little to time alone: 100 readers, all
    # kept open until the timing ends (as a set of shards would be).
    Workload(f"open reader x{OPENS}", lambda lib, data: lambda: [lib.reader(data.path) for _ in range(OPENS)],
             lambda data: ("open",)),
    Workload("r[i] loop, {reads:,} random", on_reader(getitem_loop), random_reads(1), anchored=True),
    Workload("read_indices, {reads:,} random (list)",
             on_reader(lambda lib, r, d: r.read_indices(d.indices)), random_reads(THREADS)),
    Workload("read_indices, {reads:,} random (numpy)",
             on_reader(lambda lib, r, d: r.read_indices(d.index_array)), random_reads(THREADS)),
    Workload("read_indices_iter, {reads:,} random",
             on_reader(lambda lib, r, d: count(r.read_indices_iter(iter(d.indices)))), random_reads(THREADS)),
    Workload("iterate all", on_reader(lambda lib, r, d: count(r)), all_records),
    Workload("read() all", on_reader(lambda lib, r, d: r.read()), all_records),
    Workload("{slices} random r[a:a+{slice_len:,}].read()", on_reader(read_slices),
             lambda data: ("read", data.slice_indices(), THREADS)),
    Workload("Index build", on_reader(lambda lib, r, d: lib.Index(r)), needs_index=True),
    Workload("MultiIndex build", on_reader(lambda lib, r, d: lib.MultiIndex(r)), needs_index=True),
    Workload("Index, {lookups:,} lookups", lookups("Index"), needs_index=True),
    Workload("MultiIndex, {lookups:,} lookups", lookups("MultiIndex"), needs_index=True),
    *sharded_workloads(),
)


# --- Measuring ----------------------------------------------------------------


def measure(prepare: Callable[[Any, Data], Callable[[], Any]], lib: Any, data: Data) -> float:
    """Seconds of one timed call (setup and freeing the result untimed)."""
    run = prepare(lib, data)
    gc.collect()
    start = time.perf_counter()
    result = run()
    elapsed = time.perf_counter() - start
    del result, run
    return elapsed


def compare(workload: Workload, data: Data, repeat: int) -> dict[str, Any]:
    """Runs the workload `repeat` times per library, alternating (with the
    pure-Python mmap anchor too for an anchored workload on a .bag)."""
    libraries = LIBRARIES + ((PurePythonMmap,) if workload.anchored and data.suffix == ".bag" else ())
    times: dict[str, list[float]] = {lib.name: [] for lib in libraries}
    ratios = []
    for rep in range(repeat):
        for lib in libraries[::1 if rep % 2 == 0 else -1]:
            times[lib.name].append(measure(workload.prepare, lib, data))
        ratios.append(times["bagz"][-1] / times["sackli"][-1])
    anchor = {}
    if PurePythonMmap.name in times:
        anchor_times = times[PurePythonMmap.name]
        anchor = {"anchor_s": statistics.median(anchor_times),
                  # Above 1: sackli is faster than the pure-Python reader.
                  "anchor_per_rep": statistics.median(a / s for a, s in zip(anchor_times, times["sackli"]))}
    return {
        **anchor,
        "sackli_s": statistics.median(times["sackli"]),
        "bagz_s": statistics.median(times["bagz"]),
        # Ratio of the medians, checkable against the times shown; the
        # median of the per-repetition ratios tells how steady they were.
        "speedup": statistics.median(times["bagz"]) / statistics.median(times["sackli"]),
        "speedup_per_rep": statistics.median(ratios),
        "times": times,
    }


def compile_ceiling(folder: str) -> str:
    """Builds benchmarks/ceiling.cc against the zstd sackli uses (the
    compiled-in release when sackli has it, else the system's libzstd);
    exits with the compiler's message on failure."""
    binary = os.path.join(folder, "ceiling")
    source = os.path.join(HERE, "ceiling.cc")
    commands = []
    if sackli._engine.zstd_version() != zstd_version("libzstd.so.1") and \
            os.path.exists(os.path.join(ZSTD_SOURCE, "zstd.c")):
        if not os.path.exists(ZSTD_OBJECT):  # cached: zstd.c takes ~30 s
            os.makedirs(os.path.dirname(ZSTD_OBJECT), exist_ok=True)
            commands.append(["gcc", "-O3", "-c", os.path.join(ZSTD_SOURCE, "zstd.c"), "-o", ZSTD_OBJECT])
        commands.append(["g++", "-O2", "-std=c++17", "-pthread", f"-I{ZSTD_SOURCE}", source, ZSTD_OBJECT,
                         "-o", binary])
    else:
        commands.append(["g++", "-O2", "-std=c++17", "-pthread", source, "-o", binary, "-lzstd"])
    for command in commands:
        try:
            subprocess.run(command, check=True, capture_output=True, text=True)
        except (OSError, subprocess.CalledProcessError) as error:
            details = getattr(error, "stderr", None) or str(error)
            sys.exit(f"cannot compile the ceiling ({' '.join(command)}):\n{details}\n"
                     "install gcc and g++, or pass --no-ceiling")
    return binary


def run_ceiling(binary: str, spec: tuple, data: Data, repeat: int, serial: bool = False) -> float:
    """Median seconds of the C++ ceiling for one workload (`serial`: each
    record's loads complete before the next starts, see ceiling.cc)."""
    if spec[0] == "open":
        command = [binary, "open", data.path, str(repeat), str(OPENS)]
    else:
        _, indices, threads = spec
        indices_path = os.path.join(data.folder, "indices.bin")
        np.asarray(indices, dtype=np.int64).tofile(indices_path)
        command = [binary, "read", data.path, indices_path, str(threads), str(repeat)] + (["serial"] if serial else [])
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return statistics.median(json.loads(output)["times"])


def run_dataset(data: Data, repeat: int, ceiling: str | None, only: str | None = None) -> list[dict[str, Any]]:
    rows = []
    fields = dataclasses.asdict(data.scale)
    for workload in WORKLOADS:
        if workload.needs_index and not data.scale.lookups:
            continue
        name = workload.name.format(**fields)
        if only and only not in name:
            continue
        row = {"records": data.scale.label, "format": data.suffix, "workload": name}
        row.update(compare(workload, data, repeat))
        row["ceiling_s"] = run_ceiling(ceiling, workload.ceiling(data), data, repeat) \
            if ceiling and workload.ceiling else None
        if ceiling and row.get("anchor_s") and platform.machine() in ("x86_64", "AMD64"):
            row["ceiling_serial_s"] = run_ceiling(ceiling, workload.ceiling(data), data, repeat, serial=True)
        print(format_line(row), flush=True)
        rows.append(row)
    return rows


def run(scales: Iterable[Scale], repeat: int, ceiling_folder: str | None,
        only: str | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The timed rows, and the read() peak memory of each dataset."""
    rows, memory = [], []
    ceiling = compile_ceiling(ceiling_folder) if ceiling_folder else None
    for scale in scales:
        records = make_records(scale.records, scale.size)
        for suffix in (".bag", ".bagz"):
            with tempfile.TemporaryDirectory(prefix="compare_bagz_") as folder:
                data = prepare_data(scale, suffix, folder, records)
                rows += run_dataset(data, repeat, ceiling, only)
                if not only or only in "read() peak memory":
                    peak = read_peak_memory(data)
                    memory.append({"records": scale.label, "format": suffix, **peak})
                    print(f"{scale.label:5} {suffix:5} read() peak memory / result: sackli "
                          f"{peak['sackli']:.2f}x  bagz {peak['bagz']:.2f}x", flush=True)
        del records
    return rows, memory


# --- Reporting ----------------------------------------------------------------


def seconds_text(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def ceiling_speedup(row: dict[str, Any]) -> float | None:
    return row["bagz_s"] / row["ceiling_s"] if row["ceiling_s"] else None


# Runs in a fresh process: the growth of its peak RSS over a `read()` of the
# whole bag, less the pages of the memory-mapped file it touched (they count
# in RSS but are page cache, not memory the read holds), and the bytes of
# the records read. /proc/self/clear_refs "5" resets the peak (VmHWM) to the
# current RSS after opening.
PEAK_MEMORY_CODE = """
import json, sys
lib, path = sys.argv[1], sys.argv[2]
def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))
if lib == "sackli":
    import sackli
    reader = sackli.Reader(path)
else:
    import bagz
    reader = bagz.Reader(path)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before, file_before = status("VmRSS"), status("RssFile")
records = reader.read()
peak, file_after = status("VmHWM"), status("RssFile")
growth = peak - before - (file_after - file_before)
print(json.dumps({"peak_growth": growth, "result_bytes": sum(map(len, records))}))
"""


def read_peak_memory(data: Data) -> dict[str, float]:
    """Peak memory growth of `read()` over the result's record bytes, per library."""
    ratios = {}
    for lib in LIBRARIES:
        # cwd: away from the source tree, whose `sackli` lacks the engine.
        output = subprocess.run([sys.executable, "-c", PEAK_MEMORY_CODE, lib.name, data.path],
                                check=True, capture_output=True, text=True, cwd=data.folder).stdout
        measured = json.loads(output)
        ratios[lib.name] = measured["peak_growth"] / max(measured["result_bytes"], 1)
    return ratios


def ceiling_mark(row: dict[str, Any]) -> str:
    """"†" when the ceiling's median is above sackli's (no bound there)."""
    return "†" if row["ceiling_s"] and row["ceiling_s"] > row["sackli_s"] else ""


def format_line(row: dict[str, Any]) -> str:
    ceiling = ceiling_speedup(row)
    return (f"{row['records']:5} {row['format']:5} {row['workload']:42} sackli {seconds_text(row['sackli_s']):>9}  "
            f"bagz {seconds_text(row['bagz_s']):>9}  x{row['speedup']:<6.2f} (per rep. x{row['speedup_per_rep']:<6.2f}) "
            f"ceiling {seconds_text(row['ceiling_s']):>9}"
            + (f"  x{ceiling:.2f}{ceiling_mark(row)}" if ceiling else "")
            + (f"  | pymmap {seconds_text(row['anchor_s'])}: pymmap/sackli per rep. x{row['anchor_per_rep']:.2f}"
               if row.get("anchor_s") else "")
            + (f", sackli at {row['ceiling_s'] / row['sackli_s']:.0%} of the ceiling"
               if row.get("anchor_s") and row["ceiling_s"] else "")
            + (f", {row['ceiling_serial_s'] / row['sackli_s']:.0%} of the serial ceiling "
               f"({seconds_text(row['ceiling_serial_s'])})" if row.get("ceiling_serial_s") else ""))


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| records | format | workload | sackli | bagz | ceiling | bagz/sackli | per rep. | bagz/ceiling |",
             "|---|---|---|--:|--:|--:|--:|--:|--:|"]
    for row in rows:
        ceiling = ceiling_speedup(row)
        lines.append(f"| {row['records']} | {row['format']} | {row['workload']} | {seconds_text(row['sackli_s'])} "
                     f"| {seconds_text(row['bagz_s'])} | {seconds_text(row['ceiling_s'])} | {row['speedup']:.2f}x "
                     f"| {row['speedup_per_rep']:.2f}x "
                     f"| {f'{ceiling:.2f}x{ceiling_mark(row)}' if ceiling else '–'} |")
    anchored = [row for row in rows if row.get("anchor_s")]
    if anchored:
        lines += ["", "| records | format | workload | sackli | pure-Python mmap | pymmap/sackli per rep. "
                  "| ceiling | ceiling/sackli | serial ceiling | serial ceiling/sackli |",
                  "|---|---|---|--:|--:|--:|--:|--:|--:|--:|"]
        for row in anchored:
            share = f"{row['ceiling_s'] / row['sackli_s']:.0%}" if row["ceiling_s"] else "–"
            serial = row.get("ceiling_serial_s")
            serial_share = f"{serial / row['sackli_s']:.0%}" if serial else "–"
            lines.append(f"| {row['records']} | {row['format']} | {row['workload']} | {seconds_text(row['sackli_s'])} "
                         f"| {seconds_text(row['anchor_s'])} | {row['anchor_per_rep']:.2f}x "
                         f"| {seconds_text(row['ceiling_s'])} | {share} | {seconds_text(serial)} | {serial_share} |")
    return "\n".join(lines)


def zstd_version(library: str) -> str:
    try:
        function = ctypes.CDLL(library).ZSTD_versionString
        function.restype = ctypes.c_char_p
        return function().decode()
    except (OSError, AttributeError):
        return "?"


def environment() -> dict[str, str]:
    bagz_library = os.path.join(os.path.dirname(bagz.__file__), "lib")
    bagz_so = next((os.path.join(bagz_library, name) for name in sorted(os.listdir(bagz_library))
                    if name.endswith(".so")), "")
    return {
        "machine": f"{os.cpu_count()} cores {platform.machine()} {platform.system()}",
        "python": platform.python_version(),
        "sackli": sackli.__version__,
        "bagz": importlib.metadata.version("bagz"),
        "zstd (sackli)": sackli._engine.zstd_version(),
        "zstd (bagz)": zstd_version(bagz_so),
        "command": "python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1/10 of the data, 3 repetitions (under 2 minutes)")
    parser.add_argument("--repeat", type=int, help="repetitions per workload (default 5; 3 with --quick)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--chart", metavar="PATH",
                        help="write a bar chart of the speed-ups (needs matplotlib: pip install matplotlib); "
                             f"default for full runs: {os.path.relpath(DEFAULT_CHART)}")
    parser.add_argument("--no-chart", action="store_true", help="no chart, also for a full run")
    parser.add_argument("--no-ceiling", action="store_true", help="skip the C++ ceiling (needs g++ and libzstd-dev)")
    parser.add_argument("--only", metavar="TEXT", help="run only the workloads whose name contains TEXT")
    parser.add_argument("--no-checksum", action="store_true",
                        help="sackli writes zstd frames without their checksum (as bagz does)")
    parser.add_argument("--checksummed-data", action="store_true",
                        help="the read workloads' files are written by sackli, with zstd checksums")
    args = parser.parse_args()
    CHECKSUMS["write"] = not args.no_checksum
    CHECKSUMS["read_data"] = args.checksummed_data
    scales = QUICK if args.quick else FULL
    repeat = args.repeat or (3 if args.quick else 5)
    chart = None if args.no_chart else args.chart or (None if args.quick else DEFAULT_CHART)

    env = environment()
    print(", ".join(f"{key} {value}" for key, value in env.items() if key != "command"))
    for scale in scales:
        print(f"{scale.label}: {scale.records:,} records, {scale.reads:,} random reads, {scale.slices} slices of "
              f"{scale.slice_len:,}" + (f", {scale.lookups:,} lookups" if scale.lookups else ""))
    print(f"median of {repeat} repetitions; ceiling: {'off' if args.no_ceiling else f'C++, {THREADS} threads for batch reads'}\n")
    with tempfile.TemporaryDirectory(prefix="compare_bagz_ceiling_") as ceiling_folder:
        rows, memory = run(scales, repeat, None if args.no_ceiling else ceiling_folder, args.only)

    print("\n" + markdown_table(rows))
    if memory:
        print("\n| records | format | read() peak memory / result: sackli | bagz |\n|---|---|--:|--:|")
        for entry in memory:
            print(f"| {entry['records']} | {entry['format']} | {entry['sackli']:.2f}x | {entry['bagz']:.2f}x |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"environment": env, "repeat": repeat, "scales": [dataclasses.asdict(s) for s in scales],
                       "rows": rows, "read_peak_memory": memory}, out, indent=1)
    if chart:
        from _chart import render  # matplotlib is imported only for a chart

        render(rows, chart, env, repeat)
        print(f"\nchart: {chart}")


if __name__ == "__main__":
    main()
