"""Recovery of a map whose local `sackli.maps.write` was interrupted.

The write of `dir/name` keeps its files in `dir/.name.sackli-partial-<tag>/`
(see _write): the journal `sackli-write.json`

    {"kind": "map", "target": "name", "module": "sackli.maps._recover",
     "version": 1, "compress": "zstd" | null, "spill": "values.spill", "durable": false}

and the spill, whose entries (key u64, stored length u64, the stored value
ending with its crc32c) are appended in the order the pairs arrived.
`sackli.recover("dir/name")` calls `recover_unfinished`, which reads the
spill from the start, keeps every complete entry whose crc32c matches, and
stops at the first that is torn (the file ends inside it) or damaged. The
map is laid out from those entries exactly as `write` lays it out, so it is
the very file `write(path, kept_pairs, compress)` gives, published by the
same rename.

A key spilled twice means the write would have failed (`write` raises
ValueError for a duplicate key and leaves nothing): the recovered map holds
the entries before the second appearance of a key, which is the longest
prefix of what was written that `write` would have accepted; the report
counts the entries left out.
"""

from __future__ import annotations

import mmap
import os
from typing import Any, BinaryIO, Mapping

from .. import RecoveryReport
from .. import _engine
from .._storage import LocalDestination
from ._compression import normalize
from ._write import SPILL_ENTRY, SPILL_FILE, publish, remove_partial, sorted_entries

__all__ = ["recover_unfinished"]


def recover_unfinished(folder: str, journal: Mapping[str, Any]) -> RecoveryReport:
    """Lays out, from its spill, the map whose interrupted write left the
    partial `folder` (with `journal`, its parsed sackli-write.json), renames
    it onto the target beside `folder` (replacing it, as `write` does) and
    deletes `folder`.

    Returns RecoveryReport(records=keys in the map, dropped_limits=spilled
    entries left out (a torn or damaged tail counts as one, plus those from
    a repeated key on), dropped_bytes=spill bytes left out).

    Raises:
      ValueError: the journal is not a map journal sackli can read.
    """
    target = os.path.join(os.path.dirname(os.path.abspath(folder)), _target_name(folder, journal))
    method = normalize(journal.get("compress"))
    durable = bool(journal.get("durable", False))
    spill_path = os.path.join(folder, SPILL_FILE)
    # O_NOFOLLOW: the folder was checked (_partial_trust), and a spill
    # swapped for a link since is neither read nor created through.
    try:
        spill = open(os.open(spill_path, os.O_RDONLY | os.O_NOFOLLOW), "rb")
    except FileNotFoundError:  # killed before the first value: an empty map
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        spill = open(os.open(spill_path, flags, 0o666), "w+b")
    with spill:
        entries, torn = _complete_entries(spill)
        kept = _before_repeated_key(entries)
        dropped = len(entries) - len(kept) + torn
        _, offset, length = kept[-1] if kept else (0, 0, 0)
        dropped_bytes = os.fstat(spill.fileno()).st_size - (offset + length)
        keys, offsets, lengths = sorted_entries(kept)
        publish(keys, offsets, lengths, method, spill, folder, LocalDestination(target), durable)
    remove_partial(folder)
    return RecoveryReport(len(keys), dropped, dropped_bytes)


def _target_name(folder: str, journal: Mapping[str, Any]) -> str:
    """The target's name from the journal, checked to be one plain name."""
    name = journal.get("target")
    if journal.get("kind") != "map" or not isinstance(name, str) or name in ("", ".", "..") \
            or "/" in name or os.sep in name:
        raise ValueError(f"{folder}: not a map write's journal (or no valid target): {journal!r}")
    return name


def _complete_entries(spill: BinaryIO) -> tuple[list[tuple[int, int, int]], int]:
    """(key, offset, length) of each complete, undamaged spilled entry in
    arrival order, and 1 if a torn or damaged entry follows them (0 if the
    spill ends with the last)."""
    size = os.fstat(spill.fileno()).st_size
    if size == 0:
        return [], 0
    entries = []
    position = 0
    with mmap.mmap(spill.fileno(), 0, access=mmap.ACCESS_READ) as spilled:
        while position + SPILL_ENTRY.size <= size:
            key, length = SPILL_ENTRY.unpack_from(spilled, position)
            start = position + SPILL_ENTRY.size
            end = start + length
            # Every stored value ends with its crc32c: a shorter one, or one
            # past the end of the spill, is a torn entry.
            if length < 4 or end > size:
                break
            crc = int.from_bytes(spilled[end - 4:end], "little")
            if _engine.crc32c(spilled[start:end - 4]) != crc:
                break
            entries.append((key, start, length))
            position = end
    return entries, int(position < size)


def _before_repeated_key(entries: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The entries before the first whose key an earlier entry has."""
    seen: set[int] = set()
    for number, (key, _, _) in enumerate(entries):
        if key in seen:
            return entries[:number]
        seen.add(key)
    return entries
