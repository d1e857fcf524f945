"""The shard sets of a stream's panes, from what its shard keys wrote
(`_stream_write`): each firing of a shard key is one temporary file, a
`ShardPart`; `finalize_pane` makes the parts one pane gathered into a
complete set and moves it into place.

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
in Beam's own writes). A finalisation run again after a failure finds
the parts it moved gone with their final names in place, and keeps those (`BagSink._move`);
files merged into one shard are deleted only once the whole set is in
place, so one of them gone means that shard was moved. ACCUMULATING tells
"moved here by an earlier attempt of this pane" from "moved into an
earlier pane" by the record count of this pane's shard, if it exists: a
later part holds its earlier ones, so an equal count is the same records.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterable, Iterator, NamedTuple

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from .. import LimitsPlacement
from .._sets import limits_path_for
from ._pipeline_storage import open_reader
from ._sink import BagSink, delete_quietly

__all__ = ["METRICS_NAMESPACE", "ShardPart", "finalize_pane", "temp_folder", "temp_path"]

METRICS_NAMESPACE = "sackli.WriteToSackli"
"""The namespace of the write's counters (`shard_files`: temporary shard
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


def temp_folder(sink: BagSink) -> str:
    """A new temporary folder beside the output (Beam's naming), for the
    files of one shard firing."""
    folder = sink._create_temp_dir(sink.where.prefix)
    FileSystems.mkdirs(folder)
    return folder


def temp_path(sink: BagSink, folder: str, shard: int) -> str:
    """A unique temporary name for shard `shard` in `folder`, ending with
    the output's own name and suffix (as `BagSink.open_writer`'s)."""
    name = FileSystems.split(sink.where.prefix)[1]
    unique = FileSystems.join(folder, f"{shard:05d}-{uuid.uuid4().hex}")
    return unique + "." + name + sink.where.suffix


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
    path = temp_path(sink, folder, shard)
    sink.open(path).close()
    return path


def _merged(sink: BagSink, folder: str, shard: int, parts: list[ShardPart]) -> str:
    """One temporary shard holding the records of `parts`' files, in turn."""
    path = temp_path(sink, folder, shard)
    shard_file = sink.open(path)
    for part in sorted(parts, key=lambda p: p.firing):  # the shard's firings in turn
        with open_reader(part.temp, sink.reader_options()) as reader:
            for record in reader:
                shard_file.write(record)
    shard_file.close()
    return path


def _copied(sink: BagSink, folder: str, shard: int, source: str) -> str:
    """A temporary copy of the final shard `source` (with its limits)."""
    path = temp_path(sink, folder, shard)
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
