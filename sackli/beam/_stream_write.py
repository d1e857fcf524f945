"""The unbounded (streaming) expansion of `WriteToSackli`: one shard set
per pane of every window, its shards written in parallel.

As Beam's own streaming file writes do (`fileio.WriteToFiles`, Java's
`WriteFiles`), the records of a window are spread over its shards before
they are grouped, so each shard is a key of its own and a pane's N shards
are written by N workers, not one:

    records -> (shard, record), dealt in turn from a random start per
    bundle -> GroupByKey (the input's windowing and trigger) -> each firing
    of a shard key: one temporary shard file, described by a `ShardPart`
    -> (None, part) -> GroupByKey -> each firing of this gathering key:
    one pane, finalised as a complete set

A trigger fires per key, so each shard key fires on its own: `AfterCount(2)`
counts a shard's records, not the window's. A pane is what the gathering
key collects in one firing; its index (the gathering pane's) names the set.
For windows that fire once the gathering key keeps the input's windowing
(the default trigger's continuation is itself): it fires once, on time,
with every shard's part. For windows that fire more than once it fires on
every arrival of parts (`Repeatedly(AfterCount(1))`, in the same windows,
accumulation mode and allowed lateness): the continuation trigger
(`AfterWatermark(early=AfterCount(1), ...)`) would add an on-time firing
of nothing new, after the parts of the shards' on-time firings arrived as
early ones. With one shard a pane is therefore exactly the input's pane.

Each pane becomes a set of exactly N shards by the rules of `_pane_sets`
(merging, newest-wins, retries).

Panes of one window are finalised in order (the gathering key's firings
are processed one after another, as any key's are); ACCUMULATING relies
on it to copy from the previous pane; merging windows (sessions) that
grow between panes would name the previous set differently, so their
ACCUMULATING panes, when windows fire more than once, are written as
before this design: the records of a window under one key, each firing
written whole by one worker (`_WriteWholePane`). Otherwise each shard
key's sessions are its own; the gathering key merges overlapping ones
into the window's sessions.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, Iterable, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms import trigger, window
from apache_beam.transforms.core import Windowing
from apache_beam.transforms.trigger import AccumulationMode

from ._pane_sets import METRICS_NAMESPACE, ShardPart, finalize_pane, temp_folder, temp_path
from ._provided import value
from ._sink import BagSink
from ._stream_windows import fires_once

__all__ = ["WritePanes"]


class _WithSink(beam.DoFn):
    """A step of the write that needs the sink: a BagSink, or a provider of
    one (a template's path), made once per DoFn instance on the worker, at
    its first bundle (not once per bundle: making it parses the path)."""

    def __init__(self, sink: Any) -> None:
        self._provided = sink
        self._sink: BagSink | None = None

    def start_bundle(self) -> None:
        if self._sink is None:
            self._sink = value(self._provided)
            self._shard_count = _shard_count(self._sink)


class _DealToShards(_WithSink):
    """Keys each record by a shard, in turn from a random start per bundle
    (as Beam's `iobase._RoundRobinKeyFn`), so a pane's records spread
    evenly over its shards and no two bundles favour the same one."""

    def start_bundle(self) -> None:
        super().start_bundle()
        self._next = random.randrange(self._shard_count)

    def process(self, record: Any) -> Iterator[tuple[int, Any]]:
        shard = self._next
        self._next = (shard + 1) % self._shard_count
        yield shard, record


class _WriteShardFiring(_WithSink):
    """Writes one firing of one shard key to a temporary file of its own
    and yields its `ShardPart`; a firing without records writes nothing."""

    def __init__(self, sink: Any) -> None:
        super().__init__(sink)
        self._files = Metrics.counter(METRICS_NAMESPACE, "shard_files")

    def process(
        self, keyed_records: tuple[int, Iterable[Any]], pane: Any = beam.DoFn.PaneInfoParam,
    ) -> Iterator[ShardPart]:
        shard, records = keyed_records
        sink, path, shard_file, count = self._sink, None, None, 0
        for record in records:
            if shard_file is None:
                path = temp_path(sink, temp_folder(sink), shard)
                shard_file = sink.open(path)
            shard_file.write(sink.encode(record))
            count += 1
        if shard_file is not None:
            shard_file.close()
            self._files.inc()
        yield ShardPart(path, shard, pane.index, count)


class _FinalizePaneSet(_WithSink):
    """Finalises one firing of the gathering key: one pane's set."""

    def __init__(self, sink: Any, accumulating: bool) -> None:
        super().__init__(sink)
        self._accumulating = accumulating

    def process(
        self,
        keyed_parts: tuple[None, Iterable[ShardPart]],
        w: Any = beam.DoFn.WindowParam,
        pane: Any = beam.DoFn.PaneInfoParam,
    ) -> Iterator[str]:
        yield from finalize_pane(
            self._sink, self._shard_count, keyed_parts[1], w, pane.index, self._accumulating)


def _under_one_key(element: Any) -> tuple[None, Any]:
    return None, element


def _shard_count(sink: BagSink) -> int:
    """Shards per pane: the sink's count, one for `@*` (a count of the
    runner's could change from pane to pane)."""
    return max(sink.num_shards, 1)


class _WriteWholePane(_WithSink):
    """Writes one firing of a window's single key, all its records, as a
    complete shard set (records dealt to the shards in turn): the way for
    ACCUMULATING sessions that fire more than once (see `WritePanes`)."""

    def process(
        self,
        keyed_records: tuple[None, Iterable[Any]],
        w: Any = beam.DoFn.WindowParam,
        pane: Any = beam.DoFn.PaneInfoParam,
    ) -> Iterator[str]:
        sink, shard_count = self._sink, self._shard_count
        folder, writers = None, []
        for index, record in enumerate(keyed_records[1]):
            if not writers:
                folder, writers = self._open(shard_count)
            writers[index % shard_count].write(record)
        if not writers:
            if sink.skip_if_empty:
                return
            folder, writers = self._open(shard_count)  # an empty set
        temps = [writer.close() for writer in writers]
        yield from sink.finalize_windowed_write(folder, temps, None, w, pane.index, in_order=True)

    def _open(self, shard_count: int) -> tuple[str, list[Any]]:
        folder = temp_folder(self._sink)
        return folder, [self._sink.open_writer(folder, f"{shard:05d}-{uuid.uuid4().hex}")
                        for shard in range(shard_count)]


class _SameWindows(window.WindowFn):
    """Leaves each element in the window it is in (a GroupByKey's output
    window): a new trigger without new windows. Windows of a merging
    `windowfn` still merge as it merges them: each shard key's sessions
    are its own, and overlapping ones are one session of the window's."""

    def __init__(self, windowfn: window.WindowFn) -> None:
        self._windowfn = windowfn

    def assign(self, context: window.WindowFn.AssignContext) -> list[Any]:
        return [context.window]

    def merge(self, merge_context: window.WindowFn.MergeContext) -> None:
        self._windowfn.merge(merge_context)

    def is_merging(self) -> bool:
        return self._windowfn.is_merging()

    def get_window_coder(self) -> Any:
        return self._windowfn.get_window_coder()


def _gathered(parts: beam.PCollection, windowing: Windowing) -> beam.PCollection:
    """`parts` grouped by window, firing as the module's notes say."""
    if not fires_once(windowing):
        # Every part's arrival is a pane. The continuation trigger would
        # also fire an on-time pane after the parts of the shards' on-time
        # firings arrived early: a pane of nothing new.
        parts = parts | "FireOnEveryPart" >> beam.WindowInto(
            _SameWindows(windowing.windowfn), trigger=trigger.Repeatedly(trigger.AfterCount(1)),
            accumulation_mode=windowing.accumulation_mode,
            allowed_lateness=windowing.allowed_lateness)
    return (parts
            | "OneKeyPerWindow" >> beam.Map(_under_one_key)
            | "GatherPanes" >> beam.GroupByKey())


class WritePanes(beam.PTransform):
    """Writes an unbounded, windowed PCollection through `sink`: one shard
    set per pane, each shard written by a key of its own (see the module's
    notes); outputs the final file names, in the windows and panes they
    were written for."""

    def __init__(self, sink: Any) -> None:
        super().__init__()
        # A BagSink, or a provider of one made on the workers (a template's path).
        self._sink = sink

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        windowing = records.windowing
        accumulating = windowing.accumulation_mode == AccumulationMode.ACCUMULATING
        if accumulating and windowing.windowfn.is_merging() and not fires_once(windowing):
            # A pane's unchanged shards would be copied from the previous
            # pane's set, which a session that grew since names
            # differently: one key per window writes each pane whole.
            return (records
                    | "OneKeyPerWindow" >> beam.Map(_under_one_key)
                    | "FirePanes" >> beam.GroupByKey()
                    | "WriteWholePanes" >> beam.ParDo(_WriteWholePane(self._sink))
                    .with_output_types(str))
        parts = (
            records
            | "DealToShards" >> beam.ParDo(_DealToShards(self._sink))
            | "FireShards" >> beam.GroupByKey()
            | "WriteShardFiles" >> beam.ParDo(_WriteShardFiring(self._sink))
        )
        return _gathered(parts, windowing) | "FinalizePaneSets" >> beam.ParDo(
            _FinalizePaneSet(self._sink, accumulating)).with_output_types(str)
