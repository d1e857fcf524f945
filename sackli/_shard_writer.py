"""`ShardedWriter`: writes a single bag, `name@N.ext` or `name@*.ext`.

The public face of the one shard-set writer (`sackli._shard_set`), with
bag shards: every shard is written by an atomic `Writer` that is finished
but not renamed until the whole set is complete, so the set appears all at
once at `close()`, and whatever goes wrong, no file is left behind under a
final name.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Iterable

from ._format import LIMIT_BYTES
from ._options import WriterOptions, with_overrides
from ._bucket_journal import BucketSetJournal
from ._remote_shard import RemoteBagShard, partial_folder
from ._shard_set import BagShard, OpenShard, ShardSetWriter
from ._shard_spec import refuse_glob, split_shard_entry, strip_local_prefix
from ._storage import WriteDestination, path_argument, write_destination
from ._writer import Record, check_placement

__all__ = ["ShardedWriter", "bag_shard_opener"]


def bag_shard_opener(spec: str, options: WriterOptions, sharded: bool,
                     destination: WriteDestination,
                     staging: BucketSetJournal | None = None) -> OpenShard:
    """How the set `spec` (a shard set if `sharded`, written to
    `destination`, as its writer parsed and decided) opens a shard at its
    ready path: a `Writer` whose file grows in its partial folder until it
    is renamed into place (local), else a shard streamed into a hidden
    object and copied into place (`_remote_shard`), in the prefix of
    `staging` when the set is journaled."""
    if destination.grows_in_place:
        return lambda path: BagShard(path, options, destination.at(path))
    partial = staging.prefix if staging is not None else partial_folder(spec) if sharded else None
    return lambda path: RemoteBagShard(path, options, partial, destination)


class ShardedWriter:
    """Writes records to one bag or to a shard set, atomically.

    Args:
      file_spec: a path (`str` or `os.PathLike`), `name@N.ext` (N shards
        of contiguous runs of records, as even as possible) or `name@*.ext`
        (as many shards as `max_shard_bytes` needs, named
        `name-0000i-of-0000N.ext` once N is known); local, or gs:// / s3://
        (see below).
      options: a `Writer.Options` for every shard; keyword arguments
        override its fields (e.g. `limits_placement=...`).
      max_shard_bytes: with `name@*.ext` (and only then): the most bytes a
        shard should take (stored records and limits); a record larger than
        that gets a shard alone.
      num_records: for `name@N.ext`, how many records will come, when known;
        otherwise they go to a hidden, uncompressed spool file first and are
        split evenly at `close()` (the same split; `sackli convert` does the
        same for sources of unknown length).
      overwrite: replace another shard set of the same name and suffix
        but another count (`data@3.bag` where `data@4.bag` exists): the
        new set is published, then the old one's files are deleted (its
        shards, `limits.` files, schema file and, on a bucket, manifest).
        Without it such a set is refused with FileExistsError, before
        anything is written (for `name@*.ext`: at `close()`, once the count
        is known, before any shard is published), since two sets make
        every `name@*.ext` read ambiguous. A set of the same count is
        replaced either way.

    A shard count outside 1 to 99,999 (`x@0.bag`, `x@100000.bag`) is a
    ValueError: for one unsharded file, name it (`x.bag`).

    Every file is written under a temporary name and the whole set is
    renamed into place at `close()`: a reader or a glob sees the old files
    or the complete new set, never part of one. A `with` block that raises
    (or `abort()`) leaves nothing behind. A local set is written inside one
    hidden folder, `.<name@N.ext>.sackli-partial-<tag>/`, with a journal of
    how its records are dealt: after a crash (or a writer dropped without
    `close()`, which publishes nothing and warns), `sackli.recover(spec)`
    completes the set from the records that reached the disk. Not
    thread-safe.

    `atomic=False` writes each shard in place instead, as `sackli.Writer`
    does (local paths only): a `name@*.ext` shard under its pending name
    `name-0000i-of-pending.ext` until `close()` names it, and a `name@N.ext`
    set without `num_records` from the hidden spool at `close()`. With
    `durable=True` every shard is fsynced before any is renamed, and the
    folder after the last rename.

    On gs:// and s3:// each shard streams into a hidden object
    (`<folder>/.sackli-partial-.../<name>`) and `close()` copies the set
    onto its names on the server, then deletes the hidden objects; a single
    bag (a plain URL) is uploaded under its name and appears at `close()`.

    Example:
      >>> with sackli.ShardedWriter("data@*.bagz", max_shard_bytes=1 << 30) as writer:
      ...     writer.write_many(records)
      >>> writer.paths  # data-00000-of-0000N.bagz ...
    """

    def __init__(
        self,
        file_spec: str | os.PathLike[str],
        options: WriterOptions | None = None,
        *,
        max_shard_bytes: int | None = None,
        num_records: int | None = None,
        overwrite: bool = False,
        **option_overrides: Any,
    ) -> None:
        raw = path_argument(file_spec, "file_spec")
        options = with_overrides(WriterOptions, options, option_overrides)
        spec = strip_local_prefix(raw)
        if "," in spec:
            raise ValueError(f"{file_spec}: write to one path or one shard spec, not a list")
        for name, value in (("max_shard_bytes", max_shard_bytes), ("num_records", num_records)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if not isinstance(overwrite, bool):
            raise TypeError(f"overwrite must be a bool, not {type(overwrite).__name__}")
        refuse_glob(raw, spec)
        self._spec = spec
        # Decided once, where the path enters: the set, its shards and the
        # checks here take it (an upload: no folder, nothing kept to recover).
        self._destination = write_destination(spec)
        check_placement(spec, options, self._destination)
        self._destination.check_folder(file_spec)
        # The spec is parsed here, once: the set and the shard opener take
        # it parsed, and every shard gets its ready path.
        sharded = split_shard_entry(spec)
        # A set on a bucket is staged in a hidden prefix with a journal, so
        # that `sackli recover` rolls an interrupted write forward or back.
        staging = None
        if sharded is not None and not self._destination.keeps_unfinished:
            staging = BucketSetJournal(spec, overwrite)
        self._set = ShardSetWriter(
            spec, sharded,
            bag_shard_opener(spec, options, sharded is not None, self._destination, staging),
            record_overhead=LIMIT_BYTES,
            max_shard_bytes=max_shard_bytes, num_records=num_records,
            durable=options.durable, journal_options=options, overwrite=overwrite,
            destination=self._destination, staging=staging)

    @property
    def paths(self) -> list[str]:
        """The files of the set: known up front for a path or `name@N.ext`,
        for `name@*.ext` once `close()` returned."""
        return self._set.paths

    @property
    def closed(self) -> bool:
        """Whether `close()` or `abort()` was called."""
        return self._set.closed

    @property
    def records_written(self) -> int:
        """Records written so far."""
        return self._set.records_written

    def write(self, record: Record) -> None:
        """Appends one record: bytes, str (UTF-8) or any bytes-like object."""
        self.write_many((record,))

    def write_many(self, records: Iterable[Record]) -> None:
        """Appends records in order."""
        self._check_open()
        self._set.write_many(records)

    def write_packed(self, data: Any, offsets: memoryview) -> None:
        """Writes records data[offsets[k]:offsets[k + 1]], k < len(offsets) - 1
        (`offsets`: a contiguous int64 buffer), for callers that hold records
        laid out together (sackli.arrow)."""
        self._check_open()
        self._set.write_packed(data, offsets)

    def _check_open(self) -> None:
        if self._set.closed:
            raise ValueError("write to a closed sackli.ShardedWriter")

    def close(self) -> list[str]:
        """Finishes every file (creating empty shards where no record went),
        then renames the whole set into place; returns the paths of the
        files, in order. Idempotent."""
        return self._set.close()

    def abort(self) -> None:
        """Stops writing and deletes every file written so far; files of the
        set that were already renamed into place are deleted too."""
        self._set.abort()

    def _write_first(self, rule: str, content: bytes) -> None:
        """For sackli.arrow: a companion file (`rule`: how its path follows
        from the first shard's), written before any shard is published and
        put back if the write fails (see ShardSetWriter.write_first)."""
        self._set.write_first(rule, content)

    def __del__(self) -> None:
        shard_set = getattr(self, "_set", None)
        if shard_set is None or shard_set.closed:
            return
        # Closing here would publish a write cut short as if it were complete.
        kept = "" if not self._destination.keeps_unfinished else (
            f"; what was written is kept: `sackli recover {self._spec}` completes it")
        warnings.warn(f"sackli.ShardedWriter({self._spec!r}) was not closed: nothing was "
                      f"published{kept}", ResourceWarning, source=self)
        try:
            shard_set.abandon()
        except Exception:  # nothing can report from here
            pass

    def __enter__(self) -> "ShardedWriter":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.records_written} records"
        return f"<sackli.ShardedWriter({self._spec!r}): {state}>"
