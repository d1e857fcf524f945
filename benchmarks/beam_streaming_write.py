"""A windowed (streaming) WriteToSackli on Beam's portable FnApiRunner with
two worker processes: a pane's shards written by one key (main's design)
vs. by one key per shard (`sackli/beam/_stream_write.py`).

The input is unbounded: `PeriodicImpulse` (a splittable DoFn the FnApiRunner
runs; it has no `TestStream`) fires once a second over `--windows` 10-second
fixed windows of the past, so it emits everything at once and ends; each
impulse becomes a tenth of a window's `--records` records of
`--record-bytes`: an index, then text of words drawn (seeded) from 256,
which zstd must work at (neither noise nor repeats, which it passes over
quickly). The records
are written with the expansion `WriteToSackli` uses for unbounded input,
`.../out@<shards>.bagz`, the default trigger: one pane per window.

  one key   records -> (None, record) -> GroupByKey -> one DoFn call
            writes the pane's N shards (main's `_stream_write`, kept here)
  per shard records -> (shard, record) -> GroupByKey -> one DoFn call per
            shard writes it -> GroupByKey per window -> finalise the set

Both run `--runner=FnApiRunner --direct_running_mode=multi_processing
--direct_num_workers=2`, which hands each worker a share of a stage's
groups: one group per pane reaches one worker only. The writer compresses
on `--max-parallelism` threads (default 1, as one Beam worker thread; the
engine's default would let the one-key design use every core by itself).
Beam metrics count, per pane, the groups the writing step is called with
("writing groups/pane": one for main's design, N for the per-shard one)
and, through the sink, the shard files each worker process opens. Every
run's output is read back and checked to hold every record once.

Times are wall-clock seconds of `Pipeline.run().wait_until_finish()`,
start-up of the worker processes included, and of the writing alone: from
the first shard file opened to the last one closed, in any worker (the
sink stamps both in a Beam distribution per process; reading the grouped
records from the shuffle happens in between, in the writing step), and
the CPU seconds the busiest worker process spent in that span: the pane's
critical path when every worker has a core of its own, which a shared
machine may not give (then the writing span shows no gain). The designs
alternate within each of `--repeat` repetitions; the table shows
medians and the median of the per-repetition ratios one key / per shard
(above 1: the per-shard design is faster). The machine's load makes the numbers noisy: the load
average is printed.

    PYTHONPATH=. python benchmarks/beam_streaming_write.py   # 1 window, 10,000 x 4 KiB, @4, zstd 19
    PYTHONPATH=. python benchmarks/beam_streaming_write.py --quick   # 2,000 records, twice
    PYTHONPATH=. python benchmarks/beam_streaming_write.py \
        --records 200000 --record-bytes 500 --level 3

The default makes the write the pane's work (zstd's level 19 on text);
at level 3 the same workers spend most of the time elsewhere (generating,
shuffling through the FnApiRunner's one runner process).
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any, Iterable, Iterator

import apache_beam as beam
from apache_beam import coders
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import window
from apache_beam.transforms.periodicsequence import PeriodicImpulse

import sackli
from sackli.beam._sink import BagSink
from sackli.beam._stream_write import WritePanes
from sackli.beam._write_path import for_unbounded_input, parse_write_path

WINDOW_SECONDS = 10
_WORDS = [b"%s%d" % (word, n) for word in (b"pane", b"shard", b"window", b"record", b"key",
                                             b"worker", b"bag", b"limits") for n in range(32)]


def _stamp() -> None:
    """Notes the time and this process's CPU time (ms) in its span: each
    distribution's min and max are taken when it opened its first shard
    file and closed its last."""
    Metrics.distribution("bench", f"span-{os.getpid()}").update(int(time.time() * 1000))
    Metrics.distribution("bench", f"cpu-{os.getpid()}").update(int(time.process_time() * 1000))


class _TimedShard:
    """A shard file that stamps the writing span when it is closed."""

    def __init__(self, shard: Any) -> None:
        self._shard = shard

    def write(self, record: bytes) -> None:
        self._shard.write(record)

    def close(self) -> None:
        self._shard.close()
        _stamp()


class _CountingSink(BagSink):
    """A BagSink that counts the shard files it opens per worker process
    and stamps the span in which each process writes them."""

    def open(self, temp_path: str) -> Any:
        Metrics.counter("bench", f"opened-by-{os.getpid()}").inc()
        _stamp()
        return _TimedShard(super().open(temp_path))


class _WritePaneSetOneKey(beam.DoFn):
    """main's writer of a pane (git HEAD before the per-shard design): all
    of a pane's records come in one group, dealt to its N shards in turn."""

    def __init__(self, sink: BagSink) -> None:
        self._sink = sink

    def process(
        self, keyed_records: tuple[None, Iterable[Any]], w: Any = beam.DoFn.WindowParam,
        pane: Any = beam.DoFn.PaneInfoParam,
    ) -> Iterator[str]:
        Metrics.counter("sackli.WriteToSackli", "shard_groups").inc()
        shard_count = max(self._sink.num_shards, 1)
        temp_folder = self._sink.initialize_write()
        writers = [self._sink.open_writer(temp_folder, f"{s:05d}-{uuid.uuid4().hex}")
                   for s in range(shard_count)]
        for index, record in enumerate(keyed_records[1]):
            writers[index % shard_count].write(record)
        temps = [writer.close() for writer in writers]
        yield from self._sink.finalize_windowed_write(temp_folder, temps, None, w, pane.index)


class _WritePanesOneKey(beam.PTransform):
    def __init__(self, sink: BagSink) -> None:
        super().__init__()
        self._sink = sink

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        return (records
                | "OneKeyPerWindow" >> beam.Map(lambda record: (None, record))
                | "FirePanes" >> beam.GroupByKey()
                | "WritePaneSets" >> beam.ParDo(_WritePaneSetOneKey(self._sink)))


DESIGNS = {"one key": _WritePanesOneKey, "per shard": WritePanes}


def _records(impulse: float, per_impulse: int, record_bytes: int) -> Iterator[Any]:
    """The records of one impulse, stamped with its time."""
    second = int(impulse) % WINDOW_SECONDS
    rng = random.Random(second)
    # Text of words drawn from a small vocabulary: zstd works for its
    # ratio here (neither noise nor repeats, which it passes over quickly).
    corpus = b" ".join(rng.choices(_WORDS, k=(record_bytes * 64) // 5))
    for i in range(per_impulse):
        head = b"%02d:%012d " % (second, i)
        at = rng.randrange(len(corpus) - record_bytes)
        yield window.TimestampedValue((head + corpus[at:at + record_bytes])[:record_bytes], impulse)


def _run(design: str, folder: str, args: argparse.Namespace, start: float) -> tuple[float, dict]:
    """One write pipeline; (seconds, seconds from the first shard file
    opened to the last closed, CPU seconds of the busiest writing worker
    in that span, groups the writing step was called with, {pid: shard
    files opened})."""
    where = for_unbounded_input(parse_write_path(os.path.join(folder, f"out@{args.shards}.bagz")),
                                fires_once=True)
    writer = sackli.Writer.Options(compression=sackli.CompressionZstd(level=args.level),
                                   max_parallelism=args.max_parallelism)
    sink = _CountingSink(where, coders.BytesCoder(), writer)
    options = PipelineOptions([
        "--runner=FnApiRunner", "--direct_running_mode=multi_processing",
        f"--direct_num_workers={args.workers}"])
    per_impulse = args.records // WINDOW_SECONDS
    p = beam.Pipeline(options=options)
    records = (p
               | PeriodicImpulse(start_timestamp=start, fire_interval=1,
                                 stop_timestamp=start + args.windows * WINDOW_SECONDS - 0.5)
               | beam.FlatMap(_records, per_impulse, args.record_bytes)
               | beam.WindowInto(window.FixedWindows(WINDOW_SECONDS)))
    assert not records.is_bounded  # the streaming expansion
    _ = records | DESIGNS[design](sink)
    began = time.perf_counter()
    result = p.run()
    result.wait_until_finish()
    seconds = time.perf_counter() - began
    metrics = result.metrics().query()
    counters = metrics["counters"]
    opened = {c.key.metric.name.rsplit("-", 1)[1]: c.committed
              for c in counters if c.key.metric.namespace == "bench"}
    spans = [d.committed for d in metrics["distributions"]
             if d.key.metric.namespace == "bench" and d.key.metric.name.startswith("span-")]
    writing = (max(d.max for d in spans) - min(d.min for d in spans)) / 1000
    # The CPU seconds of the busiest writing worker: the pane's critical
    # path where every worker has a core of its own.
    cpu = max((d.committed.max - d.committed.min) / 1000 for d in metrics["distributions"]
              if d.key.metric.namespace == "bench" and d.key.metric.name.startswith("cpu-"))
    # main's step counts its groups here; the per-shard step, one temporary
    # file per group (`_stream_write.METRICS_NAMESPACE`).
    groups = sum(c.committed for c in counters if c.key.metric.namespace == "sackli.WriteToSackli"
                 and c.key.metric.name in ("shard_groups", "shard_files"))
    return seconds, writing, cpu, groups, opened


def _check(folder: str, args: argparse.Namespace) -> None:
    """Every record once: windows x records, each window's set complete."""
    sets = {name.rsplit("-", 3)[0] for name in os.listdir(folder) if name.endswith(".bagz")}
    assert len(sets) == args.windows, sorted(os.listdir(folder))
    for name in sets:
        reader = sackli.Reader(os.path.join(folder, f"{name}@{args.shards}.bagz"))
        records = reader.read()
        assert len(records) == len(set(records)) == args.records // WINDOW_SECONDS * WINDOW_SECONDS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000, help="records per window")
    parser.add_argument("--record-bytes", type=int, default=4096)
    parser.add_argument("--windows", type=int, default=1)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-parallelism", type=int, default=1)
    parser.add_argument("--level", type=int, default=19, help="zstd level of the .bagz shards")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="2,000 records, 2 repetitions")
    args = parser.parse_args()
    if args.quick:
        args.records, args.repeat = 2_000, 2
    logging.getLogger().setLevel(logging.ERROR)
    # Whole windows of the past: the impulses fire at once.
    start = (int(time.time()) // WINDOW_SECONDS - args.windows - 1) * WINDOW_SECONDS
    print(f"{args.windows} window(s) x {args.records:,} records x {args.record_bytes} B, "
          f"@{args.shards}.bagz (zstd level {args.level}), {args.workers} workers, "
          f"max_parallelism={args.max_parallelism}; "
          f"load average {os.getloadavg()[0]:.2f}")
    times: dict[str, list[float]] = {d: [] for d in DESIGNS}
    writes: dict[str, list[float]] = {d: [] for d in DESIGNS}
    cpus: dict[str, list[float]] = {d: [] for d in DESIGNS}
    ratios, write_ratios, cpu_ratios = [], [], []
    with tempfile.TemporaryDirectory() as scratch:
        for rep in range(args.repeat):
            order = list(DESIGNS) if rep % 2 == 0 else list(reversed(DESIGNS))
            for design in order:
                folder = os.path.join(scratch, f"{rep}-{design.replace(' ', '_')}")
                os.mkdir(folder)
                seconds, writing, cpu, groups, opened = _run(design, folder, args, start)
                _check(folder, args)
                times[design].append(seconds)
                writes[design].append(writing)
                cpus[design].append(cpu)
                by_worker = ", ".join(f"{n} by pid {pid}" for pid, n in sorted(opened.items()))
                print(f"  rep {rep} {design:9s} {seconds:6.2f} s, writing {writing:5.2f} s, "
                      f"busiest worker's CPU {cpu:5.2f} s; groups/pane "
                      f"{groups / args.windows:g}, shard files opened by {len(opened)} "
                      f"worker(s) ({by_worker})")
            ratios.append(times["one key"][-1] / times["per shard"][-1])
            write_ratios.append(writes["one key"][-1] / writes["per shard"][-1])
            cpu_ratios.append(cpus["one key"][-1] / cpus["per shard"][-1])
    for design in DESIGNS:
        print(f"{design:9s} median {statistics.median(times[design]):6.2f} s, "
              f"writing {statistics.median(writes[design]):5.2f} s, "
              f"busiest worker's CPU {statistics.median(cpus[design]):5.2f} s")
    print(f"one key / per shard, median ratios: total {statistics.median(ratios):.2f}, "
          f"writing {statistics.median(write_ratios):.2f}, "
          f"busiest worker's CPU {statistics.median(cpu_ratios):.2f}; "
          f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
