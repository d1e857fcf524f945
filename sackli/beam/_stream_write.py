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

Each set has exactly N shards (one for `@*`, as before: a count of the
runner's could change from pane to pane), named as before; shard i holds
what shard key i contributed, by these rules:

* DISCARDING: the gathering group holds the parts that arrived since its
  last firing. A shard key that fired more than once in between (two
  parts of one shard in one pane) has its files merged into one shard
  (read and written again: rare, as the gathering key fires as soon as a
  part arrives); a shard key that did not fire is an empty shard. Every
  part is in exactly one gathering firing, so every record is in exactly
  one final file.
* ACCUMULATING: the gathering group holds every part so far, and a shard
  key's later part already holds its earlier records: shard i is its
  newest part. The files of older parts are deleted. A newest part whose
  file was moved into an earlier pane's set (its shard has not fired
  since) is copied from the previous pane's shard i, which holds it: each
  pane's set holds all records of the window so far.

Each pane's set is then finalised as a bounded write is (`BagSink`): all N
shards complete under temporary names before any is moved over its final
name (SEPARATE `limits.` files first), older sets of the same window and
pane replaced last; then the parts' temporary folders are deleted. An
empty pane (shards that fired with nothing new) writes an empty set unless
`skip_if_empty`.

Retries. Every shard firing writes a new, uniquely named temporary file in
a folder of its own (a failed attempt's file is never described, so never
moved; its folder stays behind, as a failed bundle's temporary file does
in Beam's own writes). A finalisation run again after a failure finds the parts it moved
gone with their final names in place, and keeps those (`BagSink._move`);
files merged into one shard are deleted only once the whole set is in
place, so one of them gone means that shard was moved. ACCUMULATING tells
"moved here by an earlier attempt of this pane" from "moved into an
earlier pane" by the record count of this pane's shard, if it exists: a
later part holds its earlier ones, so an equal count is the same records.

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
from typing import Any, Iterable, Iterator, NamedTuple

import apache_beam as beam
from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.transforms import trigger, window
from apache_beam.transforms.core import Windowing
from apache_beam.transforms.trigger import AccumulationMode

from .._format import limits_path_for
from .._options import LimitsPlacement
from ._pipeline_storage import open_reader
from ._provided import value
from ._sink import BagSink, delete_quietly
from ._stream_windows import fires_once

__all__ = ["METRICS_NAMESPACE", "ShardPart", "WritePanes", "finalize_pane"]

METRICS_NAMESPACE = "sackli.WriteToSackli"
"""The namespace of the counters below (`shard_files`: temporary shard
files written, one per non-empty firing of a shard key; `pane_sets`: sets
finalised; `merged_shards`: shards of a DISCARDING pane made of more than
one file)."""


class ShardPart(NamedTuple):
    """What one firing of one shard key wrote."""

    temp: str | None
    """Its temporary file (None when the firing held no records)."""
    shard: int
    """The shard key: the shard of the set it goes to."""
    firing: int
    """The shard key's pane index: which of its firings this was."""
    records: int


class _DealToShards(beam.DoFn):
    """Keys each record by a shard, in turn from a random start per bundle
    (as Beam's `iobase._RoundRobinKeyFn`), so a pane's records spread
    evenly over its shards and no two bundles favour the same one."""

    def __init__(self, sink: Any) -> None:
        self._sink = sink  # a BagSink, or a provider of one (a template's path)
        self._next = 0

    def start_bundle(self) -> None:
        self._shard_count = _shard_count(value(self._sink))
        self._next = random.randrange(self._shard_count)

    def process(self, record: Any) -> Iterator[tuple[int, Any]]:
        shard = self._next
        self._next = (shard + 1) % self._shard_count
        yield shard, record


def _temp_folder(sink: BagSink) -> str:
    """A new temporary folder beside the output (Beam's naming), for the
    files of one shard firing."""
    folder = sink._create_temp_dir(sink.where.prefix)
    FileSystems.mkdirs(folder)
    return folder


def _temp_path(sink: BagSink, folder: str, shard: int) -> str:
    """A unique temporary name for shard `shard` in `folder`, ending with
    the output's own name and suffix (as `BagSink.open_writer`'s)."""
    name = FileSystems.split(sink.where.prefix)[1]
    unique = FileSystems.join(folder, f"{shard:05d}-{uuid.uuid4().hex}")
    return unique + "." + name + sink.where.suffix


class _WriteShardFiring(beam.DoFn):
    """Writes one firing of one shard key to a temporary file of its own
    and yields its `ShardPart`; a firing without records writes nothing."""

    def __init__(self, sink: Any) -> None:
        self._provided = sink  # a BagSink, or a provider of one (a template's path)
        self._files = Metrics.counter(METRICS_NAMESPACE, "shard_files")

    def start_bundle(self) -> None:
        self._sink = value(self._provided)

    def process(
        self, keyed_records: tuple[int, Iterable[Any]], pane: Any = beam.DoFn.PaneInfoParam,
    ) -> Iterator[ShardPart]:
        shard, records = keyed_records
        sink, path, shard_file, count = self._sink, None, None, 0
        for record in records:
            if shard_file is None:
                path = _temp_path(sink, _temp_folder(sink), shard)
                shard_file = sink.open(path)
            shard_file.write(sink.encode(record))
            count += 1
        if shard_file is not None:
            shard_file.close()
            self._files.inc()
        yield ShardPart(path, shard, pane.index, count)


def _present(parts: list[ShardPart]) -> set[str]:
    """The temporary files of `parts` that exist, in one listing call (of
    their folders: a folder per firing, holding its file)."""
    folders = sorted({FileSystems.split(p.temp)[0] for p in parts if p.temp})
    if not folders:
        return set()
    matches = FileSystems.match([FileSystems.join(f, "*") for f in folders])
    return {m.path for r in matches for m in r.metadata_list}


def _exists(path: str) -> bool:
    return bool(FileSystems.match([path])[0].metadata_list)


def _empty_shard(sink: BagSink, folder: str, shard: int) -> str:
    path = _temp_path(sink, folder, shard)
    sink.open(path).close()
    return path


def _merged(sink: BagSink, folder: str, shard: int, parts: list[ShardPart]) -> str:
    """One temporary shard holding the records of `parts`' files, in turn."""
    path = _temp_path(sink, folder, shard)
    shard_file = sink.open(path)
    for part in sorted(parts, key=lambda p: p.firing):  # the shard's firings in turn
        with open_reader(part.temp, sink.reader_options()) as reader:
            for record in reader:
                shard_file.write(record)
    shard_file.close()
    return path


def _copied(sink: BagSink, folder: str, shard: int, source: str) -> str:
    """A temporary copy of the final shard `source` (with its limits)."""
    path = _temp_path(sink, folder, shard)
    if sink.reader_options().limits_placement == LimitsPlacement.SEPARATE:
        FileSystems.copy([limits_path_for(source)], [limits_path_for(path)])
    FileSystems.copy([source], [path])
    return path


def _record_count(sink: BagSink, path: str) -> int:
    with open_reader(path, sink.reader_options()) as reader:
        return len(reader)


def _discarding_shard(
    sink: BagSink, folder: str, shard: int, parts: list[ShardPart], present: set[str],
) -> tuple[str, list[ShardPart]]:
    """Shard `shard` of a DISCARDING pane from its files `parts` (all of
    them: each record once), and the parts merged into it."""
    if len(parts) == 1:
        return parts[0].temp, []  # gone: moved by an earlier attempt (`BagSink._move` checks)
    gone = [p.temp for p in parts if p.temp not in present]
    if gone:
        # Merged files are deleted only after the whole set was in place.
        return gone[0], []
    return _merged(sink, folder, shard, parts), parts


def _accumulating_shard(
    sink: BagSink, folder: str, shard: int, newest: ShardPart, present: set[str],
    shard_count: int, w: Any, pane: int,
) -> str:
    """Shard `shard` of an ACCUMULATING pane: the file of its newest part,
    or, if that went into an earlier pane's set, a copy of it from there."""
    if newest.temp in present:
        return newest.temp
    final = sink._get_final_name(shard, shard_count, w, pane)
    if _exists(final) and _record_count(sink, final) == newest.records:
        return newest.temp  # moved here by an earlier attempt of this pane
    previous = sink._get_final_name(shard, shard_count, w, pane - 1) if pane else None
    if previous is None or not _exists(previous):
        raise BeamIOError(
            f"shard {shard} of pane {pane}: its newest file {newest.temp} is gone, and no "
            f"previous pane's set holds it ({previous or 'this is the first pane'})")
    return _copied(sink, folder, shard, previous)


def finalize_pane(
    sink: BagSink, shard_count: int, parts: Iterable[ShardPart], w: Any, pane: int,
    accumulating: bool,
) -> Iterator[str]:
    """Writes pane `pane` of window `w` as a complete set of `shard_count`
    shards from the shard firings `parts` it gathered (see the module's
    rules) and yields its final names; then deletes the temporary files
    and folders of `parts`."""
    by_shard: dict[int, list[ShardPart]] = {s: [] for s in range(shard_count)}
    for part in parts:
        by_shard[part.shard].append(part)
    all_parts = [p for shard_parts in by_shard.values() for p in shard_parts]
    if accumulating:
        # A shard key's later firing holds its earlier records.
        chosen = {s: [max(ps, key=lambda p: p.firing)] if ps else [] for s, ps in by_shard.items()}
    else:
        chosen = by_shard
    chosen = {s: [p for p in ps if p.temp] for s, ps in chosen.items()}
    if not all_parts:
        return  # a closing firing of the gathering key: no shard fired since
    if sink.skip_if_empty and not any(chosen.values()):
        return  # no part has a file: nothing to clean up either
    if accumulating:
        # The group holds every part so far. A shard whose newest file is
        # gone was moved into an earlier pane, its older files deleted
        # then: only shards with a present newest file have files left,
        # so the listing and clean-up grow with what fired since, not
        # with the window's age.
        present = _present([p for ps in chosen.values() for p in ps])
        cleaned = [p for ps in by_shard.values()
                   if ps and max(ps, key=lambda p: p.firing).temp in present for p in ps]
    else:
        present, cleaned = _present(all_parts), all_parts
    folder = sink.initialize_write()  # for empty, merged and copied shards
    temps, merged = [], 0
    for shard in range(shard_count):
        files = chosen[shard]
        if not files:
            temps.append(_empty_shard(sink, folder, shard))
        elif accumulating:
            temps.append(_accumulating_shard(
                sink, folder, shard, files[0], present, shard_count, w, pane))
        else:
            temp, members = _discarding_shard(sink, folder, shard, files, present)
            temps.append(temp)
            merged += bool(members)
    finals = list(sink.finalize_windowed_write(folder, temps, None, w, pane, in_order=True))
    if merged:
        Metrics.counter(METRICS_NAMESPACE, "merged_shards").inc(merged)
    Metrics.counter(METRICS_NAMESPACE, "pane_sets").inc()
    # Only now that the set is in place: each firing's folder (with a
    # merged or superseded file, or nothing left after its move).
    delete_quietly(sorted({FileSystems.split(p.temp)[0] for p in cleaned if p.temp}))
    yield from finals


class _FinalizePaneSet(beam.DoFn):
    """Finalises one firing of the gathering key: one pane's set."""

    def __init__(self, sink: Any, accumulating: bool) -> None:
        self._provided = sink  # a BagSink, or a provider of one (a template's path)
        self._accumulating = accumulating

    def start_bundle(self) -> None:
        self._sink = value(self._provided)
        self._shard_count = _shard_count(self._sink)

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


class _WriteWholePane(beam.DoFn):
    """Writes one firing of a window's single key, all its records, as a
    complete shard set (records dealt to the shards in turn): the way for
    ACCUMULATING sessions that fire more than once (see `WritePanes`)."""

    def __init__(self, sink: Any) -> None:
        self._provided = sink  # a BagSink, or a provider of one (a template's path)

    def start_bundle(self) -> None:
        self._sink = value(self._provided)

    def process(
        self,
        keyed_records: tuple[None, Iterable[Any]],
        w: Any = beam.DoFn.WindowParam,
        pane: Any = beam.DoFn.PaneInfoParam,
    ) -> Iterator[str]:
        sink = self._sink
        shard_count = _shard_count(sink)
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
        folder = _temp_folder(self._sink)
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
