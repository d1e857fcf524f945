"""Completing a shard set whose write was interrupted (see `_set_journal`).

The journal says how the records were dealt:
- "count": shard i holds the i-th run of `counts` records. The shards the
  writer finished are kept; the one it was writing is recovered (every
  record whose limit reached the disk); those it never opened are empty.
- "size" (`name@*.ext` with `max_shard_bytes`): the shards written so far,
  the last one recovered (dropped when nothing of it reached the disk),
  named `name-0000i-of-0000N.ext` for the N kept.
- "spool" (`name@N.ext`, count unknown): the spool is recovered and dealt
  into N even shards, as `close()` would have.

The set is then published as `close()` publishes it (companions first, then
the shards) and the hidden folder is removed. Another set of the name (a
different count) is reported with FileExistsError before anything is
published, even when the journal says `overwrite`: recovery deletes nothing
but what the recovered set's own names replace.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Any, NamedTuple

from . import _engine
from ._format import limits_path_for, move_checks
from ._options import LimitsPlacement, WriterOptions
from ._reader import Reader
from ._set_conflicts import refuse_other_sets
from ._set_journal import COMPANION, COMPANION_RULES, SPOOL, options_from_journal
from ._shard_set import files_of, pending_shard_name
from ._shard_spec import shard_name, split_shard_entry
from ._shard_writer import ShardedWriter
from ._unfinished import UnfinishedWrite
from ._writer import Writer
from ._storage import delete_objects, sync_folders, write_object

__all__ = ["SetRecovery", "recover_set"]

# A journal's `overwrite` replaces only the shard names the recovered set
# produces (renamed onto once every shard is complete); another set of the
# name is never deleted by recovery, since the journal may not be the
# writer's own (a stray folder in a download or a shared folder).
_OTHER_SETS_ADVICE = ("recovery deletes no other set, whatever its journal asks: move or "
                      "delete that set, then recover again")


class SetRecovery(NamedTuple):
    """What recovering a set saved."""

    records: int
    dropped_limits: int
    dropped_bytes: int
    paths: list[str]


def recover_set(write: UnfinishedWrite) -> SetRecovery:
    """Completes the set `write` describes and publishes it; removes its
    hidden folder. ValueError when the journal is not one this sackli knows."""
    journal = write.journal or {}
    sharded = split_shard_entry(write.target)
    mode = journal.get("mode")
    if sharded is None or mode not in ("count", "size", "spool"):
        raise ValueError(f"{write.folder}: the journal of an unfinished shard set that this "
                         "version of sackli cannot complete")
    _check_counts(write, journal, sharded[1])
    try:
        options = options_from_journal(journal, write.folder)
    except (KeyError, TypeError, AttributeError) as error:  # a journal sackli did not write
        raise ValueError(f"{write.folder}: the journal of an unfinished shard set has no valid "
                         f"writer options ({error!r})") from None
    if mode == "spool":
        return _deal_spool(write, journal, options)
    base, _, suffix = sharded
    in_place = bool(journal.get("in_place"))

    def written_at(name: str) -> str:
        return name if in_place else os.path.join(write.folder, os.path.basename(name))

    dropped = [0, 0]
    if mode == "count":
        counts = journal["counts"]
        names = [shard_name(base, i, len(counts), suffix) for i in range(len(counts))]
        sources = [written_at(name) for name in names]
        for source in sources:
            _complete_shard(source, options, dropped)
    else:
        sources = []
        index = 0
        while os.path.exists(source := written_at(pending_shard_name(base, index, suffix))):
            sources.append(source)
            index += 1
        for source in sources:
            _complete_shard(source, options, dropped)
        if len(sources) > 1 and _length(sources[-1]) == 0:
            delete_objects(files_of(sources.pop()))  # nothing of it reached the disk
        if not sources:  # killed before the first shard: an empty set
            sources.append(written_at(pending_shard_name(base, 0, suffix)))
            _complete_shard(sources[0], options, dropped)
        names = [shard_name(base, i, len(sources), suffix) for i in range(len(sources))]
    records = sum(map(_length, sources))
    # Before anything is published, whatever the journal's `overwrite`: see
    # _OTHER_SETS_ADVICE.
    refuse_other_sets(write.target, len(names), _OTHER_SETS_ADVICE)
    _write_companions(write.folder, names[0], options.durable)
    for source, name in zip(sources, names):
        _move_bag(source, name, options)
    if options.durable:
        sync_folders(names)
    shutil.rmtree(write.folder, ignore_errors=True)
    return SetRecovery(records, dropped[0], dropped[1], names)


def _check_counts(write: UnfinishedWrite, journal: dict[str, Any], count: str) -> None:
    """ValueError unless a "count" journal deals records into exactly the
    shards its target names (`name@N.ext`: N runs): recovery must publish
    only the names the target produces."""
    if journal.get("mode") != "count":
        return
    counts = journal.get("counts")
    if (not isinstance(counts, list) or not count.isdigit() or len(counts) != int(count)
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts)):
        raise ValueError(f"{write.folder}: the journal of an unfinished shard set deals its records "
                         f"into {counts!r}, not into the {count} shards of {write.target}")


def _complete_shard(path: str, options: WriterOptions, dropped: list[int]) -> None:
    """Makes `path` a complete bag: recovered while it has a limits file
    (its write was cut short; or it was finished with SEPARATE limits, and
    becomes a TAIL bag), an empty bag when it was never opened."""
    if not os.path.exists(path):
        _write_empty_bag(path, options)
    elif os.path.exists(limits_path_for(path)):
        _, limits, tail = _engine.recover(path)
        dropped[0] += limits
        dropped[1] += tail


def _write_empty_bag(path: str, options: WriterOptions) -> None:
    with Writer(path, dataclasses.replace(options, atomic=False)):
        pass


def _is_separate(path: str, options: WriterOptions) -> bool:
    # A recovered shard has TAIL limits whatever the options said.
    return (options.limits_placement == LimitsPlacement.SEPARATE
            and os.path.exists(limits_path_for(path)))


def _length(path: str) -> int:
    placement = LimitsPlacement.SEPARATE if os.path.exists(limits_path_for(path)) \
        else LimitsPlacement.TAIL
    with Reader(path, limits_placement=placement) as bag:
        return len(bag)


def _move_bag(source: str, target: str, options: WriterOptions) -> None:
    """Moves a complete bag (and a SEPARATE bag's limits) onto `target`."""
    if _is_separate(source, options):
        if source != target:
            os.replace(limits_path_for(source), limits_path_for(target))
    else:
        try:  # a TAIL bag replacing a SEPARATE one: the old limits would mislead
            os.remove(limits_path_for(target))
        except FileNotFoundError:
            pass
    if source != target:
        move_checks(source, target)
        os.replace(source, target)


def _companions(folder: str) -> list[tuple[str, bytes]]:
    """(rule, content) of every companion file kept in `folder`."""
    found = []
    for entry in sorted(os.listdir(folder)):
        if entry.startswith(COMPANION):
            rule = entry[len(COMPANION):]
            if rule not in COMPANION_RULES:
                raise ValueError(f"{os.path.join(folder, entry)}: a companion file of a kind "
                                 "this version of sackli cannot write")
            with open(os.path.join(folder, entry), "rb") as file:
                found.append((rule, file.read()))
    return found


def _write_companions(folder: str, first_shard: str, durable: bool) -> None:
    for rule, content in _companions(folder):
        write_object(COMPANION_RULES[rule](first_shard), content, durable=durable)


def _deal_spool(write: UnfinishedWrite, journal: dict[str, Any],
                options: WriterOptions) -> SetRecovery:
    """Recovers the spool, then writes the set from it as `close()` would."""
    spool = os.path.join(write.folder, SPOOL)
    dropped = (0, 0)
    if not os.path.exists(spool):  # killed before the first record
        _write_empty_bag(spool, WriterOptions(limits_placement=LimitsPlacement.TAIL))
    elif os.path.exists(limits_path_for(spool)):
        _, *rest = _engine.recover(spool)
        dropped = (rest[0], rest[1])
    companions = _companions(write.folder)
    with Reader(spool) as records:
        total = len(records)
        refuse_other_sets(write.target, None, _OTHER_SETS_ADVICE)
        writer = ShardedWriter(write.target, options, num_records=total)
        try:
            for rule, content in companions:
                writer._write_first(rule, content)
            step = 4096
            for first in range(0, total, step):
                writer.write_many(records.read_range(first, min(step, total - first)))
            paths = writer.close()
        except BaseException:
            writer.abort()
            raise
    shutil.rmtree(write.folder, ignore_errors=True)
    return SetRecovery(total, dropped[0], dropped[1], paths)
