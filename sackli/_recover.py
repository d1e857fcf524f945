"""`recover`: completes a write that was interrupted (a bag, a shard set, a
dataset, a map), wherever `_unfinished` finds one."""

from __future__ import annotations

import errno
import importlib
import os
from typing import Iterable, NamedTuple

from . import _engine
from ._bucket_recover import missing_error, recover_bucket_writes
from ._format import PARTIAL_MARKER, limits_path_for, move_checks, partial_folder_prefix
from ._partial_trust import check_partial_folder
from ._reader import Reader
from ._set_recover import recover_set
from ._shard_spec import shard_name, split_shard_entry, strip_local_prefix
from ._storage import is_remote, path_argument, resolve_write_links
from ._unfinished import (
    BAG, UnfinishedWrite, unfinished_writes, unfinished_writes_of, write_of_folder,
)

__all__ = ["RecoveryReport", "partial_writes", "recover", "recover_write"]


# The module whose `recover_unfinished(folder, journal)` completes each kind
# of compound write that core sackli does not complete itself; a journal
# must name exactly this one.
_COMPLETED_BY = {"dataset": "sackli.datasets._recover", "map": "sackli.maps._recover"}


class _Counts(NamedTuple):
    records: int
    """Records recovered: of the bag or of every shard; datapoints of a
    dataset; entries of a map."""
    dropped_limits: int
    """Limits found in `limits.<name>` that pointed nowhere valid."""
    dropped_bytes: int
    """Record bytes after the last recovered record, removed."""


class RecoveryReport(_Counts):
    """What `recover` saved and dropped: the 3-tuple `(records,
    dropped_limits, dropped_bytes)` it has always been (callers unpack and
    compare it), and `rolled_back`: on a bucket, writes rolled back
    (nothing of them was published; `records` counts those rolled
    forward). An attribute, not a fourth item, so the tuple is unchanged."""

    rolled_back: int

    def __new__(cls, records: int, dropped_limits: int, dropped_bytes: int,
                rolled_back: int = 0) -> "RecoveryReport":
        report = super().__new__(cls, records, dropped_limits, dropped_bytes)
        report.rolled_back = rolled_back
        return report


def partial_writes(path: str) -> list[str]:
    """The temporary files of unfinished writes of the local bag `path`:
    every `.<name>.sackli-partial-<tag>/<name>` beside it, oldest first."""
    return [write.where for write in unfinished_writes_of(path)
            if write.kind == BAG and write.refused is None and os.path.isfile(write.where)]


def _target_of_partial(path: str) -> str | None:
    """The target of `path` when it is a temporary file in a partial folder."""
    folder, name = os.path.split(path)
    parent, partial = os.path.split(folder)
    if partial.startswith("." + name + PARTIAL_MARKER):
        return os.path.join(parent, name)
    return None


def recover(path: str | os.PathLike[str]) -> RecoveryReport:
    """Completes a write that was interrupted, and publishes what it saved.

    `path` is what the write was making: a bag path, a shard spec
    (`name@N.ext`, `name@*.ext`: `sackli.ShardedWriter` and
    `sackli.arrow.write_table`), a dataset folder (`sackli.datasets`; a
    sharded one's unfinished shards are completed together) or a map file
    (`sackli.maps`); or the hidden folder (or temporary file) of the write
    itself. It looks, in this order, for:

    1. `limits.<name>` beside `path`: a bag written in place
       (`atomic=False`, as bagz writes them; or a bag with SEPARATE
       limits, turned into one with TAIL limits).
    2. the hidden folder of an unfinished write of `path`:
       `.<name>.sackli-partial-<tag>/` beside it. There must be only one;
       with several, recover the one you want by its folder's path.

    A bag keeps every record whose limit was written and lies inside the
    file, truncates what follows and appends the limits. A shard set keeps
    every record that reached the disk, in order, dealt into shards as its
    writer would have dealt them; a dataset every datapoint all of whose
    fields reached the disk; a map every entry that reached the disk. The
    result is then published under its name (a set all at once, as its
    writer's `close()` would have) and the hidden folder removed.

    A `path` that is a symbolic link is recovered through: the write's
    temporary files are beside the file it points to, which is replaced
    (a link in a sticky, world-writable folder owned by someone else is
    not followed, as for writers). Do not recover a write that a writer
    still has open.

    A hidden folder is untrusted input (a download, a shared folder):
    nothing in it is followed. A folder that is a symbolic link, or holds
    links, devices, fifos or files with other hard links, is refused with
    a PermissionError naming the entry; a journal whose target is not the
    name the folder carries is refused with a ValueError; nothing is
    changed then. A set journal's `overwrite` never deletes another set of
    the name: such a set is reported (FileExistsError) before anything is
    published.

    On gs:// and s3://, `path` is a shard spec (`s3://b/out/set@4.bag`,
    `name@*.ext`) or a prefix ending in "/" (every interrupted write under
    it). Each interrupted shard-set or row-set write found by its journal
    (in its hidden staging prefix) rolls forward when its publish was
    decided (the set's manifest says "publishing": the copies are made
    again, each checked against the journal, the manifest written
    "complete", the staging and any older sets the write replaced
    removed), and back otherwise (the staging is deleted: the set reads as
    before the write, the older set or nothing). `records` then counts the
    records of the sets rolled forward, `rolled_back` the writes rolled
    back. A staged object gone or changed since it was staged is an
    OSError naming it, and nothing of that write is changed.

    Returns a RecoveryReport; `records` counts records (of every shard),
    datapoints or map entries.

    Raises:
      FileNotFoundError: nothing to recover (no `limits.<name>`, no
        unfinished write of `path`).
      PermissionError: the hidden folder, or an entry of it, is not what a
        sackli writer leaves (see above).
      ValueError: several unfinished writes of `path` exist, or a journal
        this version of sackli cannot complete or that names another target.
    """
    if is_remote(argument := path_argument(path, "path")):
        return _recover_bucket(argument)
    local = strip_local_prefix(argument).rstrip("/") or "/"
    target = _target_of_partial(local)
    if target is not None:
        return _complete_partial(local, target)
    own = write_of_folder(local)
    if own is not None:
        return recover_write(own)
    if split_shard_entry(local) is None and os.path.exists(limits_path_for(local)):
        return RecoveryReport(*_engine.recover(local))
    # A write through a symbolic link keeps its temporary files beside the
    # file the link points to, and replaces that file.
    if os.path.islink(local):
        local = resolve_write_links(local)
    writes = unfinished_writes_of(local)
    if len(writes) > 1:
        listed = "\n  ".join(write.where for write in writes)
        raise ValueError(
            f"{local}: {len(writes)} unfinished writes of it exist; recover the one you "
            f"want by its path:\n  {listed}"
        )
    if writes:
        return recover_write(writes[0])
    if os.path.isdir(local):
        # A folder whose parts are unfinished writes (a sharded dataset's
        # shards): every one of them.
        inside = unfinished_writes(local)
        if inside:
            return _sum(recover_write(write) for write in inside)
    shards = _shards_written_one_by_one(local)
    if shards:
        return _sum(recover(shard) for shard in shards)
    hidden = f"no unfinished write ({os.path.basename(partial_folder_prefix(local))}*)"
    looked_for = hidden if split_shard_entry(local) is not None else \
        f"no {os.path.basename(limits_path_for(local))} and {hidden}"
    raise FileNotFoundError(
        errno.ENOENT,
        f"{local}: nothing to recover: {looked_for} beside it (the write completed, "
        "or it was never started)",
        local,
    )


def _recover_bucket(url: str) -> RecoveryReport:
    """`recover` of a gs:// / s3:// shard spec or prefix: every interrupted
    write rolled forward or back (`_bucket_recover`)."""
    done = recover_bucket_writes(url)
    if not done and not url.endswith("/"):
        raise missing_error(url)
    stuck = [write.line() for write in done if write.outcome == "neither"]
    if stuck:
        raise OSError(errno.EIO, "\n".join(stuck), url)
    return RecoveryReport(sum(write.records for write in done), 0, 0,
                          sum(write.outcome == "rolled back" for write in done))


def recover_write(write: UnfinishedWrite) -> RecoveryReport:
    """Completes one unfinished write (see `recover`); raises its
    `refused` error, or the one a fresh check of its folder gives, instead
    of acting on a folder that is not what a sackli writer leaves."""
    if write.refused is not None:
        raise write.refused
    check_partial_folder(write.folder)  # it may have changed since it was listed
    if write.kind == BAG:
        name = os.path.basename(write.target)
        partial = os.path.join(write.folder, name)
        if not os.path.exists(partial):
            if os.listdir(write.folder):  # not a bag's: never delete what we cannot read
                raise ValueError(
                    f"{write.folder}: a hidden folder of an unfinished write that holds no "
                    f"{name} and no journal: this version of sackli cannot complete it; "
                    "look inside, then delete it")
            os.rmdir(write.folder)  # killed before the file was made
            raise FileNotFoundError(
                errno.ENOENT, f"{write.target}: nothing to recover: its write was "
                f"interrupted before any file was made (removed {write.folder})", write.target)
        return _complete_partial(partial, write.target)
    if write.kind == "set":
        saved = recover_set(write)
        return RecoveryReport(saved.records, saved.dropped_limits, saved.dropped_bytes)
    module = (write.journal or {}).get("module")
    if module != _COMPLETED_BY.get(write.kind):  # a journal names no other code to run
        raise ValueError(f"{write.folder}: an unfinished write of kind {write.kind!r} that this "
                         "version of sackli cannot complete")
    report = importlib.import_module(module).recover_unfinished(write.folder, write.journal)
    return RecoveryReport(*report)


def _shards_written_one_by_one(spec: str) -> list[str]:
    """For `name@N.ext`: the shards with a write of their own to recover
    (sets written by sackli before sets had a journal)."""
    sharded = split_shard_entry(spec)
    if sharded is None or sharded[1] == "*":
        return []
    base, count, suffix = sharded
    shards = [shard_name(base, i, int(count), suffix) for i in range(int(count))]
    return [shard for shard in shards
            if os.path.exists(limits_path_for(shard)) or unfinished_writes_of(shard)]


def _sum(reports: Iterable[RecoveryReport]) -> RecoveryReport:
    # Local reports only: every field is a count.
    return RecoveryReport(*map(sum, zip(*reports)))


def _complete_partial(partial: str, target: str) -> RecoveryReport:
    """Recovers the temporary file `partial` and renames it onto `target`."""
    check_partial_folder(os.path.dirname(partial) or ".")
    if os.path.exists(limits_path_for(partial)):
        report = RecoveryReport(*_engine.recover(partial))
    else:  # finished, but not yet renamed
        with Reader(partial) as complete:
            report = RecoveryReport(len(complete), 0, 0)
    move_checks(partial, target)
    os.replace(partial, target)
    try:
        os.rmdir(os.path.dirname(partial))
    except OSError:
        pass  # not empty: something else lives there
    return report
