"""Recovery of a dataset shard whose `DatasetWriter` was interrupted.

A local `DatasetWriter` of `dir/name` writes in the hidden folder
`dir/.name.sackli-partial-<tag>/`. Before any record can reach the disk it
writes there the journal `sackli-write.json`:

    {"kind": "dataset", "target": "name", "module": "sackli.datasets._recover",
     "version": 1, "spec": {...spec.json's content...}, "durable": false}

Each bag of the shard (`refs.bag`, `<field>.bag` / `<field>.bagz`) is a
sackli.Writer inside that folder, so while unfinished it is itself a hidden
partial folder `.refs.bag.sackli-partial-<tag>/` holding the records and
`limits.refs.bag`, which grow as the writer flushes. `sackli.recover`
(through the journal's "module") calls `recover_unfinished`, which:

1. completes every bag from what reached the disk (sackli's bag recovery:
   every record whose limit was written and lies inside the file);
2. keeps the datapoints that are complete: datapoint i is kept when it and
   every datapoint before it have their refs record and every value those
   refs point at (so the kept datapoints are a prefix of those appended);
3. cuts `refs.bag` and every field's bag to exactly those datapoints;
4. writes spec.json, as `close()` does, deletes the journal and renames the
   folder onto the target.

Every step can be repeated: a recovery that is itself interrupted is
completed by recovering again. A sharded dataset has one such folder, with
its own journal, per unfinished shard (`ds/.000003.sackli-partial-<tag>/`),
and each is recovered alone (see ShardedDatasetWriter).
"""

from __future__ import annotations

import os
import shutil
import struct
from typing import Any, Mapping

from .. import CorruptionError, Reader, RecoveryReport
from .. import _engine
from .._sets import JOURNAL as JOURNAL_FILE, limits_path_for, move_checks, partial_folder_prefix
from .._storage import LocalDestination, write_object
from ._bag import BagWriter, open_records
from ._field_files import COMPRESSION_KEY, field_file, parse_compression
from ._shard_folders import SPEC_FILE
from ._refs import unpack_refs
from ._spec import FieldType, parse_spec, spec_json

__all__ = ["dataset_journal", "recover_unfinished"]

_MODULE = __name__
_LIMIT = struct.Struct("<Q")


def dataset_journal(target: str, raw_spec: Mapping[str, Any], durable: bool) -> dict[str, Any]:
    """The journal of a dataset write of `target` (its folder's path):
    what recovery needs to finish the shard as `close()` would."""
    return {"kind": "dataset", "target": os.path.basename(target), "module": _MODULE,
            "version": 1, "spec": dict(raw_spec), "durable": durable}


def recover_unfinished(folder: str, journal: Mapping[str, Any]) -> RecoveryReport:
    """Completes the interrupted dataset write whose partial folder is
    `folder` (with `journal`, its parsed sackli-write.json) and renames it
    onto its target, beside `folder`.

    Returns RecoveryReport(records=datapoints kept, dropped_limits=records
    dropped from all the shard's bags, dropped_bytes=their bytes).

    Raises:
      FileExistsError: the target exists (the folder is left as it is).
      ValueError: the journal is not a dataset journal sackli can read.
      sackli.CorruptionError: a bag in the folder is not a `bags` file
        (the folder is left as it is).
    """
    target = os.path.join(os.path.dirname(os.path.abspath(folder)), _target_name(folder, journal))
    if os.path.lexists(target):
        raise FileExistsError(
            f"{target}: exists; its unfinished write in {folder} was not recovered "
            "(move one of them away first)")
    raw_spec = journal["spec"]
    report = _keep_complete_datapoints(folder, raw_spec)
    _publish(folder, target, raw_spec, bool(journal.get("durable", False)))
    return report


def _keep_complete_datapoints(folder: str, raw_spec: Mapping[str, Any]) -> RecoveryReport:
    """Completes every bag of the shard in `folder`, then cuts them all to
    the datapoints that are complete."""
    files = _field_files(raw_spec, folder)
    fields = parse_spec({k: v for k, v in raw_spec.items() if k != COMPRESSION_KEY})
    dropped_limits = dropped_bytes = 0
    for name in ["refs.bag", *files.values()]:
        limits, nbytes = _complete_bag(os.path.join(folder, name))
        dropped_limits += limits
        dropped_bytes += nbytes
    datapoints, needed = _complete_datapoints(folder, fields, files)
    for name, records in [("refs.bag", datapoints), *((files[f], needed[f]) for f in fields)]:
        limits, nbytes = _cut_bag(os.path.join(folder, name), records)
        dropped_limits += limits
        dropped_bytes += nbytes
    return RecoveryReport(datapoints, dropped_limits, dropped_bytes)


def _publish(folder: str, target: str, raw_spec: Mapping[str, Any], durable: bool) -> None:
    """What `DatasetWriter.close()` does once the bags are complete: writes
    spec.json and renames the folder onto `target` (leftovers of the
    interrupted writers and the journal removed first)."""
    _remove_hidden(folder)
    if durable:  # the bags recovered here, before the rename
        _sync_files(folder)
    write_object(os.path.join(folder, SPEC_FILE), spec_json(raw_spec), durable=durable)
    # Renamed as `DatasetWriter.close()` renames it; the journal removed
    # after the rename (at worst the published shard keeps a stray journal,
    # which readers ignore).
    LocalDestination(target).publish_folder(folder, durable=durable, journal=JOURNAL_FILE)


def _sync_files(folder: str) -> None:
    """fsyncs every file in `folder`."""
    for entry in os.scandir(folder):
        if entry.is_file(follow_symlinks=False):
            descriptor = os.open(entry.path, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)


def _target_name(folder: str, journal: Mapping[str, Any]) -> str:
    """The target's name from the journal, checked to be one plain name."""
    if journal.get("kind") != "dataset" or not isinstance(journal.get("spec"), dict):
        raise ValueError(f"{folder}: not a dataset write's journal: {journal!r}")
    name = journal.get("target")
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or os.sep in name:
        raise ValueError(f"{folder}: a dataset journal names no valid target: {name!r}")
    return name


def _field_files(raw_spec: Mapping[str, Any], where: str) -> dict[str, str]:
    """field -> its bag's file name, in field (sorted) order."""
    spec = {k: v for k, v in raw_spec.items() if k != COMPRESSION_KEY}
    fields = parse_spec(spec)
    compressed = parse_compression(raw_spec.get(COMPRESSION_KEY), fields, where)
    return {field: field_file(field, field in compressed) for field in fields}


def _complete_bag(path: str) -> tuple[int, int]:
    """Makes the bag at `path` a complete `bags` file from what reached the
    disk; returns the (limits, bytes) dropped. A bag whose writer had not
    started yet becomes an empty one.

    The engine's recovery does the work, as for any bag (not the
    dispatcher `sackli.recover`: a field's file name may look like a shard
    spec, `a@2.bag`)."""
    dropped = (0, 0)
    for partial in _unfinished_bag(path):  # a sackli.Writer's records, unfinished
        if os.path.exists(limits_path_for(partial)):
            dropped = _engine.recover(partial)[1:]
        move_checks(partial, path)
        os.replace(partial, path)
    if os.path.exists(limits_path_for(path)):  # a cut (_cut_bag) interrupted
        dropped = _engine.recover(path)[1:]
    if os.path.exists(path) and _records_in(path) == 0:
        # Not even the leading empty record reached the disk.
        os.remove(path)
    if not os.path.exists(path):
        BagWriter(path).close()  # the leading empty record and its limit
    return dropped


def _records_in(path: str) -> int:
    """The records of the complete bag at `path`, as sackli reads it (a
    `bags` file's leading empty record included)."""
    with Reader(path) as reader:
        return len(reader)


def _unfinished_bag(path: str) -> list[str]:
    """The records file a sackli.Writer of `path` left in its partial
    folder (`.<name>.sackli-partial-<tag>/<name>`), if any."""
    prefix = partial_folder_prefix(path)
    parent, start = os.path.split(prefix)
    name = os.path.basename(path)
    found = [os.path.join(parent, entry, name) for entry in os.listdir(parent)
             if entry.startswith(start)]
    return [partial for partial in found if os.path.isfile(partial)]


def _complete_datapoints(folder: str, fields: Mapping[str, FieldType],
                         files: Mapping[str, str]) -> tuple[int, dict[str, int]]:
    """The number of complete datapoints, and how many records of each
    field they use.

    Datapoint i is complete when its refs record is what the writer wrote
    (each ref the next record of its field) and every record it points at
    is in its field's bag; the writer appended values and refs in order, so
    the first incomplete datapoint ends the prefix."""
    available = {}
    for field, name in files.items():
        with open_records(os.path.join(folder, name)) as records:
            available[field] = len(records)
    used = dict.fromkeys(fields, 0)
    order = list(fields.items())
    datapoints = 0
    with open_records(os.path.join(folder, "refs.bag")) as refs:
        for record in refs.read_range_iter(0, len(refs)):
            following = _follow(record, order, used, available)
            if following is None:
                break
            used = following
            datapoints += 1
    return datapoints, used


def _follow(record: bytes, order: list[tuple[str, FieldType]], used: Mapping[str, int],
            available: Mapping[str, int]) -> dict[str, int] | None:
    """The records of each field used once the datapoint of refs `record`
    is added, or None when the datapoint is not complete (or not what the
    writer wrote)."""
    try:
        refs = unpack_refs(record)
    except Exception:  # msgpack raises several kinds for a torn record
        return None
    if not isinstance(refs, list) or len(refs) != len(order):
        return None
    after = dict(used)
    for (field, ftype), ref in zip(order, refs):
        if ftype.is_list:
            if ref == []:
                continue
            if not (isinstance(ref, list) and len(ref) == 2 and ref[0] == used[field]
                    and isinstance(ref[1], int) and ref[1] > 0):
                return None
            after[field] = used[field] + ref[1]
        else:
            if ref != used[field] or isinstance(ref, bool):
                return None
            after[field] = used[field] + 1
        if after[field] > available[field]:
            return None
    return after


def _cut_bag(path: str, records: int) -> tuple[int, int]:
    """Cuts the complete `bags` file at `path` to its first `records`
    records; returns the (limits, bytes) dropped.

    Crash-safe: the first limits are written as `limits.<name>` beside the
    file (a bag being written in place), which the engine's recovery then
    completes: cutting the records and appending those limits. Interrupted,
    the bag is recovered to the same cut by running this again."""
    kept = records + 1  # the leading empty record of every bags file
    with open(path, "rb") as file:
        size = file.seek(0, os.SEEK_END)
        file.seek(size - _LIMIT.size)
        start = _LIMIT.unpack(file.read(_LIMIT.size))[0]
        total = (size - start) // _LIMIT.size
        if kept >= total:
            return 0, 0
        file.seek(start)
        limits = file.read(kept * _LIMIT.size)
    if len(limits) != kept * _LIMIT.size:
        raise CorruptionError(f"{path}: its limits end before record {kept}")
    write_object(limits_path_for(path), limits)
    _engine.recover(path)
    ends = _LIMIT.unpack_from(limits, len(limits) - _LIMIT.size)[0]
    return total - kept, start - ends


def _remove_hidden(folder: str) -> None:
    """Deletes what interrupted writers left in `folder`: empty partial
    folders of its bags, temporary files of spec.json or the journal."""
    for entry in os.listdir(folder):
        if entry.startswith("."):
            path = os.path.join(folder, entry)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)
