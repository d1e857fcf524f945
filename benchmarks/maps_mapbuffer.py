"""sackli.maps vs. seung-lab's mapbuffer 1.2.0 on the same maps, in one process.

Builds deterministic maps (100,000 keys: random integers below 2**63, 1 KiB values, half
random bytes and half a repeated pattern so that zstd has work to do), with
no compression and with zstd, written to a temporary folder. Each workload
runs for sackli and mapbuffer in turn (alternating which goes first),
`--repeat` times, with the page cache warm; both read the same file, each
through its own memory mapping of it. Printed: the median time of each
library and "mapbuffer/sackli", mapbuffer's median over sackli's (above 1,
sackli is faster), with the goal of the issue where it sets one. "CPU time
ratio" is the same ratio of the median CPU times (of every thread of the
process): sackli's batched and scanning workloads run on several threads,
so on a machine that other work keeps busy their wall-clock ratio falls
towards this one.

Workloads:
  build         MapBuffer(dict, compress=...).tobytes()
  open          MapBuffer(open file) and len() (x100; sackli: MapBuffer(path))
  lookups       mb[key] for 10,000 random present keys, one at a time
  batched       sackli: mb.get_many(10,000 keys); mapbuffer: a loop of mb[key]
  items() scan  every (key, value) of the map

Commands (from the repository root):

    python benchmarks/maps_mapbuffer.py --quick    # 10,000 keys, 3 repetitions, ~20 s
    python benchmarks/maps_mapbuffer.py            # 100,000 keys, 5 repetitions, ~2 min
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

import mapbuffer

import sackli
import sackli.maps

VALUE_BYTES = 1024
LOOKUPS = 10_000
OPENS = 100
# The goals: mapbuffer time / sackli time at least this.
GOALS = {("none", "lookups"): 2.0, ("zstd", "lookups"): 4.0,
         ("none", "batched"): 20.0, ("zstd", "batched"): 20.0,
         ("none", "build"): 2.0, ("zstd", "build"): 2.0}


def make_data(keys: int, seed: int = 0) -> dict[int, bytes]:
    """`keys` random keys to 1 KiB values, half random, half pattern. Keys
    stay below 2**63: mapbuffer's search takes them as signed integers."""
    rng = random.Random(seed)
    data: dict[int, bytes] = {}
    while len(data) < keys:
        head = rng.randbytes(VALUE_BYTES // 2)
        data[rng.randrange(1 << 63)] = head + head[:16] * (VALUE_BYTES // 32)
    return data


class Workloads:
    """The workloads of one compression over a map file written by mapbuffer
    (the same bytes sackli writes: see tests/maps/test_maps_interchange.py)."""

    def __init__(self, data: dict[int, bytes], compress: str | None, folder: str) -> None:
        self.data = data
        self.compress = compress
        self.path = os.path.join(folder, f"map-{compress or 'none'}.mb")
        with open(self.path, "wb") as file:
            file.write(mapbuffer.MapBuffer(data, compress=compress).tobytes())
        rng = random.Random(1)
        self.keys = rng.sample(list(data), min(LOOKUPS, len(data)))
        self._file = open(self.path, "rb")
        self.ours = sackli.maps.MapBuffer(self.path)
        self.theirs = mapbuffer.MapBuffer(self._file)
        self.check()

    def check(self) -> None:
        """Both libraries give the right values (before anything is timed)."""
        sample = self.keys[:100]
        expected = [self.data[key] for key in sample]
        assert [self.ours[key] for key in sample] == expected
        assert self.ours.get_many(sample) == expected
        assert [self.theirs[key] for key in sample] == expected

    def close(self) -> None:
        self._file.close()

    # Each workload: {library: function to time}.
    def build(self) -> dict[str, Callable[[], Any]]:
        return {
            "sackli": lambda: sackli.maps.MapBuffer(self.data, compress=self.compress).tobytes(),
            "mapbuffer": lambda: mapbuffer.MapBuffer(self.data, compress=self.compress).tobytes(),
        }

    def open(self) -> dict[str, Callable[[], Any]]:
        def ours() -> None:
            for _ in range(OPENS):
                len(sackli.maps.MapBuffer(self.path))

        def theirs() -> None:
            for _ in range(OPENS):
                with open(self.path, "rb") as file:
                    len(mapbuffer.MapBuffer(file))
        return {"sackli": ours, "mapbuffer": theirs}

    def lookups(self) -> dict[str, Callable[[], Any]]:
        ours, theirs, keys = self.ours, self.theirs, self.keys
        return {"sackli": lambda: [ours[key] for key in keys],
                "mapbuffer": lambda: [theirs[key] for key in keys]}

    def batched(self) -> dict[str, Callable[[], Any]]:
        ours, theirs, keys = self.ours, self.theirs, self.keys
        return {"sackli": lambda: ours.get_many(keys),
                "mapbuffer": lambda: [theirs[key] for key in keys]}

    def scan(self) -> dict[str, Callable[[], Any]]:
        ours, theirs = self.ours, self.theirs
        return {"sackli": lambda: sum(len(value) for _, value in ours.items()),
                "mapbuffer": lambda: sum(len(value) for _, value in theirs.items())}


WORKLOADS = [("build", "build"), ("open", f"open x{OPENS}"), ("lookups", "mb[key], 10,000 random"),
             ("batched", "get_many 10,000 (mapbuffer: loop)"), ("scan", "items() scan")]


def time_once(function: Callable[[], Any]) -> tuple[float, float]:
    """Wall-clock and CPU time (of every thread of the process) of one call."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    function()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(functions: dict[str, Callable[[], Any]],
            repeat: int) -> dict[str, list[tuple[float, float]]]:
    """Times each library `repeat` times, alternating which goes first."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in functions}
    names = list(functions)
    for name in names:  # warm-up: page cache, lazy imports, thread pool
        functions[name]()
    for rep in range(repeat):
        for name in (names if rep % 2 == 0 else names[::-1]):
            times[name].append(time_once(functions[name]))
    return times


def medians(times: list[tuple[float, float]]) -> tuple[float, float]:
    return (statistics.median(wall for wall, _ in times),
            statistics.median(cpu for _, cpu in times))


def show(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="10,000 keys and 3 repetitions (a smoke run)")
    parser.add_argument("--keys", type=int, help="keys per map (default 100,000)")
    parser.add_argument("--repeat", type=int, help="repetitions (default 5; --quick 3)")
    parser.add_argument("--only", metavar="TEXT", help="only the workloads whose name contains TEXT")
    args = parser.parse_args(argv)
    keys = args.keys or (10_000 if args.quick else 100_000)
    repeat = args.repeat or (3 if args.quick else 5)

    print(f"sackli {sackli.__version__} vs mapbuffer {importlib.metadata.version('mapbuffer')}; "
          f"Python {platform.python_version()}, {os.cpu_count()} cores; {keys:,} keys of "
          f"{VALUE_BYTES} B; medians of {repeat}")
    data = make_data(keys)
    rows = []
    with tempfile.TemporaryDirectory(prefix="sackli-maps-bench-") as folder:
        for compress in (None, "zstd"):
            label = compress or "none"
            workloads = Workloads(data, compress, folder)
            try:
                for method, name in WORKLOADS:
                    if args.only and args.only not in name:
                        continue
                    times = measure(getattr(workloads, method)(), repeat)
                    ours, ours_cpu = medians(times["sackli"])
                    theirs, theirs_cpu = medians(times["mapbuffer"])
                    goal = GOALS.get((label, method))
                    rows.append((label, name, ours, theirs, theirs / ours, goal,
                                 theirs_cpu / ours_cpu))
                    print(f"  {label:<5} {name:<36} sackli {show(ours):>9}  mapbuffer "
                          f"{show(theirs):>9}  {theirs / ours:6.2f}x  (CPU time "
                          f"{theirs_cpu / ours_cpu:.2f}x)"
                          + (f"  goal {goal:g}x" if goal else ""), flush=True)
            finally:
                workloads.close()
    print()
    print("| values | workload | sackli | mapbuffer | mapbuffer/sackli | CPU time ratio | goal |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for label, name, ours, theirs, ratio, goal, cpu_ratio in rows:
        goal_text = f"≥ {goal:g}x" if goal else "–"
        print(f"| {label} | {name} | {show(ours)} | {show(theirs)} | {ratio:.2f}x | "
              f"{cpu_ratio:.2f}x | {goal_text} |")
    for label, name, _, _, ratio, goal, _ in rows:
        if goal and ratio < goal:
            print(f"goal missed: {label} {name}: {ratio:.2f}x < {goal:g}x", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
