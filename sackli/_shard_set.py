"""Writing a shard set: one file, `name@N.ext` or `name@*.ext`, all at once.

This is the one shard-set writer: `sackli.ShardedWriter` (and through it
`sackli.arrow.write_table`) and `sackli convert` (which also writes
TFRecord, JSON Lines and text shards) both drive a `ShardSetWriter`; only
the per-shard file differs, given as a factory (`open_shard`).

The plan, whatever the format:
- a plain path: one file.
- `name@N.ext`: N shards `name-0000i-of-0000N.ext` holding contiguous runs
  of records, as even as possible (`even_split`: sizes differ by at most
  one, larger first). That needs the record count. **When it is not known
  (`num_records=None`) the records go to a hidden, uncompressed spool bag
  first and are split evenly at `close()`**: the source is read once and the
  split is the same as with the count given up front.
- `name@*.ext` with `max_shard_bytes`: a new shard whenever the next
  records would take the open one past `max_shard_bytes` (stored bytes plus
  each format's per-record overhead, with the compression ratio learnt so
  far); a record too large for any shard gets one alone; an empty input
  gives one empty shard. Shards are written under pending names and named
  `name-0000i-of-0000N.ext` once N is known.

Every shard file stays under a hidden temporary name until every shard is
complete; `close()` then publishes them one after the other (a reader or a
glob sees the old files or the complete new set). Any failure, or
`abort()`, discards every shard file, published ones included (every
target a publish may have reached). Companion files (`write_first`: a row
set's schema) are written before the first shard is published, and put
back as they were on failure. On a bucket a manifest brackets the publish
(`sackli._consistency`): sackli's readers of the set see a mixture of two
writes as an error.

The Beam sink (`sackli.beam._sink`) does not use it: Beam decides the shard
count and which records go to each bundle, and its FileBasedSink owns the
temporary names and the renames (through Beam's file systems). It shares the
format facts (`_format`) and the shard names.
"""

from __future__ import annotations

import array
import bisect
import dataclasses
import itertools
import os
import uuid
from typing import Any, Callable, Iterable, Protocol

from . import _bulk
from ._batching import Gatherer, records_per_batch
from ._bucket_journal import BucketSetJournal, publish_staged
from ._consistency import SetManifest
from ._format import checksums_path_for, limits_path_for, stored_bytes
from ._options import CompressionNone, LimitsPlacement, WriterOptions
from ._reader import Reader
from ._record_iterables import refuse_single_record
from ._set_conflicts import check_shard_count, refuse_other_sets, remove_other_sets
from ._set_journal import COMPANION_RULES, SetJournal
from ._shard_spec import refuse_glob, shard_name
from ._storage import (
    LocalDestination, WriteDestination, delete_objects, read_object, sync_folders, write_destination,
    write_object,
)
from ._writer import Writer

__all__ = [
    "BagShard", "OpenShard", "ShardFile", "ShardSetWriter", "even_split", "files_of",
    "pending_shard_name",
]

# The spool is copied out this many records, or about this many bytes, at a
# time (compressed records of one write are held until it returns).
_SPOOL_COPY_RECORDS = 4096
_SPOOL_COPY_BYTES = 16 << 20
# write_many() gathers records up to this many (or bytes) before handing
# them on in one packed batch.
_GATHER_RECORDS = 4096
_GATHER_BYTES = 4 << 20


def even_split(total: int, shards: int) -> list[int]:
    """Record counts of `shards` contiguous runs of `total` records, as even
    as possible (they differ by at most one, larger first)."""
    base, extra = divmod(total, shards)
    return [base + (1 if shard < extra else 0) for shard in range(shards)]


def files_of(path: str) -> list[str]:
    """The files a bag at `path` may consist of: the bag, its limits file and
    its CRC-32C sidecar."""
    return [path, limits_path_for(path), checksums_path_for(path)]


def pending_shard_name(base: str, index: int, suffix: str) -> str:
    """The name of shard `index` of `base@*suffix` while the count is not
    known yet (only labels its temporary file; the suffix is kept, so the
    format and compression follow it)."""
    return f"{base}-{index:05d}-of-pending{suffix}"


class ShardFile(Protocol):
    """One shard being written under a hidden temporary name."""

    @property
    def records_written(self) -> int:
        """Records written so far."""

    def stored_bytes(self) -> int:
        """Bytes the finished file will take for the records so far,
        per-record overhead included (what `max_shard_bytes` bounds)."""

    def write_many(self, records: list[Any]) -> None:
        """Appends records (bytes or byte-wide memoryviews)."""

    def write_packed(self, data: Any, offsets: memoryview) -> None:
        """Appends records data[offsets[k]:offsets[k + 1]]."""

    def finish(self) -> None:
        """Completes the file, still under its temporary name."""

    def publish(self, target: str) -> list[str]:
        """After `finish`: moves the file (and its companions) onto
        `target`; returns the files now under final names."""

    def targets(self, target: str) -> list[str]:
        """Every file `publish(target)` may create or replace (a failed
        publish may have reached any of them)."""

    def discard(self) -> None:
        """Deletes the temporary files (finished or not)."""


OpenShard = Callable[[str], ShardFile]
"""Opens the shard file for a shard's (final or pending) name."""


class BagShard:
    """A bag shard written by `sackli.Writer`, which keeps it in its own
    hidden partial folder until `publish` renames it onto the target."""

    def __init__(self, path: str, options: WriterOptions, destination: WriteDestination) -> None:
        # `path` is ready (a shard's name, the set's spec parsed once),
        # `options` resolved and `destination` decided (the set's, at
        # `path`): the Writer parses and checks none of it again.
        self._writer = Writer._at(path, options, destination)

    @property
    def writer(self) -> Writer:
        """The Writer of this shard."""
        return self._writer

    @property
    def records_written(self) -> int:
        return self._writer.records_written

    def stored_bytes(self) -> int:
        return stored_bytes(self._writer.bytes_written, self._writer.records_written)

    def write_many(self, records: list[Any]) -> None:
        self._writer.write_many(records)

    def write_packed(self, data: Any, offsets: memoryview) -> None:
        _bulk.write_packed(self._writer, data, offsets)

    def finish(self) -> None:
        _bulk.close_unpublished(self._writer)

    def publish(self, target: str) -> list[str]:
        # A durable set syncs its folder once, after its last shard.
        _bulk.publish(self._writer, target, sync_folder=False)
        return files_of(target)

    def targets(self, target: str) -> list[str]:
        return files_of(target)

    def discard(self) -> None:
        _bulk.discard(self._writer)

    def abandon(self) -> None:
        """Stops writing and keeps what was written, for `sackli.recover`."""
        self._writer._abandon()


def _spool_options() -> WriterOptions:
    """Options of a spool file: fast to write and read back."""
    return WriterOptions(compression=CompressionNone(), limits_placement=LimitsPlacement.TAIL)


def _as_record(record: Any) -> Any:
    """A record as bytes or a byte-wide memoryview; TypeError otherwise."""
    if isinstance(record, str):
        return record.encode()
    if isinstance(record, bytes):
        return record
    try:
        return memoryview(record).cast("B")
    except TypeError:
        raise TypeError(
            f"a record must be bytes, str or a bytes-like object, not {type(record).__name__}"
        ) from None


class ShardSetWriter:
    """Writes a shard set through per-shard files from `open_shard` (see the
    module docstring for the plan). Not thread-safe.

    Args:
      spec: a path, `name@N.ext` or `name@*.ext`, local or gs:// / s3://
        (already checked: no list, no `posix:` prefix).
      sharded: `split_shard_entry(spec)`, as the caller parsed it (once):
        (base, count, suffix), or None for a plain path.
      open_shard: opens the file of one shard, given its ready name.
      record_overhead: bytes a record costs in a shard file beyond its
        payload (8 for a bag's limit), for `max_shard_bytes`.
      max_shard_bytes: with `name@*.ext`, and only with it.
      num_records: for `name@N.ext`, the number of records when known.
      durable: every shard file is synced when it finishes (the shard
        files' own job), the companions when written, and the folders after
        the last publish: a `close()` that returned survives power loss.
      journal_options: for a local bag shard set (`sackli.ShardedWriter`),
        the options of its shards: the set is then written inside one
        hidden folder with a journal (`_set_journal`), so that
        `sackli.recover(spec)` can complete it after a crash; `open_shard`
        is not used.
      overwrite: replace other shard sets of the name (another count),
        deleted once this one is published; without it they are refused
        (FileExistsError; `sackli._set_conflicts`).
      destination: where the set is written (`write_destination(spec)`),
        as the caller decided where `spec` entered: local files renamed into
        place, with a journal, kept for recovery; or objects uploaded to
        gs:// or s3:// (no rename). By default decided here.
      staging: for a set on a bucket, the journal of its staging prefix
        (`_bucket_journal`), where `open_shard` stages the shards: written
        before the first upload, so that `sackli.recover(spec)` rolls a
        killed write back (before the manifest says "publishing") or
        forward (after). Without it, nothing of a remote write is kept.

    Raises ValueError for a `max_shard_bytes` that does not go with `spec`
    or a shard count outside 1 to 99,999.
    """

    def __init__(self, spec: str, sharded: tuple[str, str, str] | None,
                 open_shard: OpenShard, *, record_overhead: int,
                 max_shard_bytes: int | None = None, num_records: int | None = None,
                 durable: bool = False, journal_options: WriterOptions | None = None,
                 overwrite: bool = False, destination: WriteDestination | None = None,
                 staging: BucketSetJournal | None = None) -> None:
        check_shard_count(spec)  # `x@0.bag` would be written under that literal name
        refuse_glob(spec, spec)
        by_size = sharded is not None and sharded[1] == "*"
        if by_size != (max_shard_bytes is not None):
            raise ValueError(
                f"{spec}: max_shard_bytes goes with a 'name@*.ext' spec, and only "
                "with it ('name@N.ext' makes N shards, a plain path one file)"
            )
        if max_shard_bytes is not None and max_shard_bytes <= 0:
            raise ValueError(f"max_shard_bytes must be > 0, not {max_shard_bytes}")
        if num_records is not None and num_records < 0:
            raise ValueError(f"num_records must be >= 0, not {num_records}")
        if not overwrite:  # before anything is written (`name@*`: at close)
            refuse_other_sets(spec, None)
        self._overwrite = overwrite
        self._spec = spec
        self._destination = write_destination(spec) if destination is None else destination
        self._sharded = sharded is not None
        self._durable = durable
        self._open_shard = open_shard
        self._overhead = record_overhead
        self._max_shard_bytes = max_shard_bytes
        self._shard: ShardFile | None = None  # the open shard
        self._spool: BagShard | None = None
        self._finished: list[ShardFile] = []
        # Every target a publish may have reached (deleted on failure).
        self._published: list[str] = []
        # By rule: (path, content) of each companion file, from the shards' paths.
        self._companions: dict[str, Callable[[list[str]], tuple[str, bytes]]] = {}
        # (path, old content or None) of companion files written.
        self._replaced: list[tuple[str, bytes | None]] = []
        self._manifest: SetManifest | None = None
        self._gathered = Gatherer(self._write_list, _GATHER_RECORDS, _GATHER_BYTES)
        self._closed = False
        self._records = 0
        self._shard_index = 0
        self._spooling = False
        self._counts: list[int | None]
        if sharded is None:
            self._paths, self._counts = [spec], [None]
        else:
            self._base, count, self._suffix = sharded
            if by_size:
                self._paths, self._counts = [], []
            else:
                n = int(count)
                self._paths = [shard_name(self._base, i, n, self._suffix) for i in range(n)]
                self._spooling = num_records is None
                self._counts = [None] if self._spooling else even_split(num_records or 0, n)
        self._ratio = 1.0  # stored bytes per payload byte, learnt as we write
        self._payload = 0  # payload bytes written to the open shard
        self._journal: SetJournal | None = None
        if (journal_options is not None and sharded is not None
                and self._destination.keeps_unfinished):
            mode = "size" if by_size else "spool" if self._spooling else "count"
            self._journal = SetJournal(spec, journal_options, mode,
                                       None if mode != "count" else list(self._counts),
                                       overwrite=overwrite)
        self._staging = staging
        # Whether the publish was decided (the manifest says "publishing"):
        # from then on a failure leaves the staging for `sackli recover`.
        self._decided = False
        # Whether an abort left the staging because the manifest could not
        # be put back (see `abort`).
        self._left_for_recovery = False
        if staging is not None:
            staging.begin()  # before the first upload

    @property
    def paths(self) -> list[str]:
        """The files of the set: known up front for a path or `name@N.ext`,
        for `name@*.ext` once `close()` returned."""
        return list(self._paths)

    @property
    def closed(self) -> bool:
        """Whether `close()` or `abort()` was called."""
        return self._closed

    @property
    def records_written(self) -> int:
        """Records written so far."""
        return self._records

    # --- Writing ------------------------------------------------------------

    def write_many(self, records: Iterable[Any]) -> None:
        """Appends records (bytes, str as UTF-8, or bytes-like) in order;
        TypeError for a single str or bytes-like object."""
        self._check_open()
        refuse_single_record(records)
        if type(records) is list and set(map(type, records)) <= {bytes}:
            self.write_bytes(records)
        else:
            self._gathered.extend(records, _as_record)

    def write_bytes(self, records: list[bytes]) -> None:
        """Appends a list of `bytes` records as it is (the caller vouches
        for the type: no check per record), e.g. batches read from a bag."""
        self._check_open()
        self._gathered.flush()  # records written before stay before
        self._write_list(records)

    def _write_list(self, records: list[Any]) -> None:
        offsets = None
        if self._max_shard_bytes is not None:  # only sizes need the offsets
            offsets = memoryview(array.array("q", [0, *itertools.accumulate(map(len, records))]))
        self._route(len(records), offsets,
                    lambda shard, first, end: shard.write_many(records[first:end]))

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"write to a closed writer of {self._spec}")

    def write_packed(self, data: Any, offsets: memoryview) -> None:
        """Appends records data[offsets[k]:offsets[k + 1]], k < len(offsets) - 1
        (`offsets`: a contiguous int64 buffer)."""
        self._check_open()
        self._gathered.flush()  # records written before stay before
        self._route(len(offsets) - 1, offsets, lambda shard, first, end: shard.write_packed(
            data, offsets[first:end + 1]))

    def _route(self, count: int, offsets: memoryview | None,
               write: Callable[[ShardFile, int, int], None]) -> None:
        """Hands records [0, count) to the shards they belong in:
        `write(shard, first, end)` writes records [first, end) to `shard`.
        `offsets` (count + 1 int64, record k's payload is [offsets[k],
        offsets[k + 1])) is needed with `max_shard_bytes` only."""
        first = 0
        while first < count:
            shard = self._current_shard()
            take = self._records_that_fit(shard, offsets, first, count)
            write(shard, first, first + take)
            if offsets is not None:
                self._learn_ratio(shard, offsets[first + take] - offsets[first])
            self._records += take
            first += take
            if first < count or self._shard_full(shard):
                self._finish_shard()

    def _learn_ratio(self, shard: ShardFile, payload: int) -> None:
        self._payload += payload
        if self._payload:
            stored = shard.stored_bytes() - self._overhead * shard.records_written
            self._ratio = max(stored / self._payload, 1e-3)

    def _current_shard(self) -> ShardFile:
        if self._spooling:
            if self._spool is None:
                if self._journal is not None:
                    spool = self._journal.spool_path()
                    self._spool = BagShard(spool,
                                           dataclasses.replace(_spool_options(), atomic=False),
                                           self._destination.at(spool))
                else:
                    # Spooled beside the set, or (for an upload) on local
                    # disk: read back at once, never published.
                    spool = self._destination.scratch_path(
                        f"{self._base}.sackli-spool{self._suffix}.bag")
                    self._spool = BagShard(spool, _spool_options(), LocalDestination(spool))
            return self._spool
        if self._shard is None:
            name = self._next_path()
            if self._journal is not None:
                path = self._journal.shard_path(name)
                self._shard = BagShard(path, self._journal.shard_options,
                                       self._destination.at(path))
            else:
                self._shard = self._open_shard(name)
            self._payload = 0
        return self._shard

    def _next_path(self) -> str:
        if self._max_shard_bytes is not None:
            return pending_shard_name(self._base, self._shard_index, self._suffix)
        if self._shard_index >= len(self._paths):
            raise ValueError(
                f"more records than announced ({sum(c or 0 for c in self._counts)})")
        return self._paths[self._shard_index]

    def _records_that_fit(self, shard: ShardFile, offsets: memoryview | None, first: int,
                          last: int) -> int:
        """How many of records [first, last) go to the open shard now."""
        if self._spooling:
            return last - first  # the spool takes everything
        if self._max_shard_bytes is None:
            count = self._counts[self._shard_index]
            if count is None:
                return last - first
            return min(last - first, count - shard.records_written)
        assert offsets is not None  # _write_list computes them for sizes
        budget = self._max_shard_bytes - shard.stored_bytes()
        ratio, base, overhead = self._ratio, offsets[first], self._overhead

        def cost(end: int) -> float:
            return ratio * (offsets[end] - base) + overhead * (end - first)

        end = max(first, bisect.bisect_right(range(first, last + 1), budget, key=cost) - 1 + first)
        if end == first and shard.records_written == 0:
            end = first + 1  # a record too large for any shard gets one alone
        return end - first

    def _shard_full(self, shard: ShardFile) -> bool:
        if self._spooling:
            return False
        if self._max_shard_bytes is None:
            count = self._counts[self._shard_index]
            return count is not None and shard.records_written >= count
        return shard.stored_bytes() >= self._max_shard_bytes

    def _finish_shard(self) -> None:
        """Finishes the open shard under its temporary name."""
        if self._shard is None:
            return
        shard, self._shard = self._shard, None
        self._finished.append(shard)
        shard.finish()
        self._shard_index += 1

    # --- Finishing ----------------------------------------------------------

    def close(self) -> list[str]:
        """Finishes every file (creating empty shards where no record went),
        then publishes the whole set; returns the paths of the files, in
        order. Idempotent. On failure everything is discarded."""
        if self._closed:
            return self.paths
        try:
            self._gathered.flush()
            if self._spooling:
                self._split_spool()
            elif self._max_shard_bytes is not None:
                if self._shard is not None or self._shard_index == 0:
                    self._current_shard()
                    self._finish_shard()
                count = self._shard_index
                self._paths = [shard_name(self._base, i, count, self._suffix) for i in range(count)]
                if not self._overwrite:
                    refuse_other_sets(self._spec, count)  # before any shard is published
            else:
                if len(self._counts) == 1 and not self._sharded:
                    # A plain remote path appears when its shard finishes.
                    self._write_companions()
                while self._shard_index < len(self._paths):
                    self._current_shard()
                    self._finish_shard()
                if None not in self._counts and self._records != sum(self._counts):
                    raise ValueError(f"{self._records} records came, "
                                     f"{sum(self._counts)} were announced")
            self._publish()
        except Exception as error:
            if self._decided:
                self._closed = True
                raise OSError(
                    f"{self._spec}: published, but not finished ({error}); run `sackli recover "
                    f"{self._spec}` to finish") from error
            staged = self._staging is not None
            self.abort()
            if self._left_for_recovery:
                error.add_note(
                    f"{self._spec}: the write failed while its publish was being decided; "
                    f"run `sackli recover {self._spec}`: it finishes the publish or undoes it")
            elif staged:
                error.add_note(f"{self._spec}: nothing was published")
            raise
        except BaseException:
            if not self._decided:
                self.abort()
            raise
        self._closed = True
        if self._journal is not None:
            self._journal.remove()
        if self._overwrite and self._staging is None:
            # The new set is published: the sets it replaces go (a staged
            # set's publish did it).
            remove_other_sets(self._spec, len(self._paths))
        return self.paths

    def write_first(self, rule: str, content: bytes) -> None:
        """Registers a companion file holding `content`, at the path that
        `COMPANION_RULES[rule]` gives from the set's first shard: it is
        written (atomically) before any shard is published, so the set
        never appears without it, and put back as it was if the write
        fails. The journal keeps it too, for a recovered set. Registering a
        rule again (before `close`) replaces its content: what a writer
        learns from the records (a row set's dictionaries) goes in last."""
        path_for = COMPANION_RULES[rule]
        self._companions[rule] = lambda paths: (path_for(paths[0]), content)
        if self._journal is not None:
            self._journal.add_companion(rule, content)

    def _write_companions(self) -> list[str]:
        """Writes the companion files (once), keeping what they replace."""
        written = []
        for make in self._companions.values():
            path, data = make(self.paths)
            try:
                old = read_object(path)
            except FileNotFoundError:
                old = None
            self._replaced.append((path, old))
            write_object(path, data, durable=self._durable)
            written.append(path)
        self._companions.clear()
        return written

    def _publish(self) -> None:
        """Writes the companions, then moves every finished shard onto its
        name; on a bucket inside a manifest's "publishing" ... "complete"."""
        if self._staging is not None:
            self._publish_staged(self._staging)
            return
        if self._sharded:  # a set on a bucket has a manifest (_consistency)
            self._manifest = SetManifest.of_set(self._paths,
                                                f"pid {os.getpid()} {uuid.uuid4().hex[:12]}")
        if self._manifest is not None:
            self._manifest.begin()
        files = self._write_companions()
        for shard, target in zip(self._finished, self._paths):
            self._published.extend(shard.targets(target))  # before: it may fail half-way
            files.extend(shard.publish(target))
        if self._durable:
            sync_folders(files)
        if self._manifest is not None:
            self._manifest.complete(files)

    def _publish_staged(self, staging: BucketSetJournal) -> None:
        """Records every staged object in the journal, decides (the manifest
        "publishing", naming the journal), then rolls forward as
        `sackli.recover` would (`publish_staged`)."""
        objects: list[tuple[str, str, int]] = []
        absent: list[str] = []
        for shard, target in zip(self._finished, self._paths):
            staged, stale = shard.staged(target)  # type: ignore[attr-defined]
            objects.extend(staged)
            absent.extend(stale)
        companions = [make(self.paths) for make in self._companions.values()]
        self._companions.clear()
        staging.stage(objects, companions, absent)
        self._manifest = staging.manifest()
        self._manifest.begin(staging.url)
        self._decided = True
        publish_staged(staging.prefix, staging.document, self._manifest)

    def _split_spool(self) -> None:
        """Copies the spooled records into even shards."""
        self._spooling = False
        spool, self._spool = self._spool, None
        if spool is None:  # no record came: only empty shards
            self._counts = [0] * len(self._paths)
            for _ in self._paths:
                self._current_shard()
                self._finish_shard()
            return
        try:
            spool.finish()
            with Reader(spool.writer.partial_path) as records:
                step = records_per_batch(_SPOOL_COPY_BYTES, records.approximate_bytes_per_record(),
                                         _SPOOL_COPY_RECORDS)
                self._counts = list(even_split(len(records), len(self._paths)))
                start = 0
                for count in self._counts:
                    shard = self._current_shard()
                    for first in range(start, start + count, step):
                        n = min(step, start + count - first)
                        data, offsets = _bulk.read_packed(records, first, n)
                        shard.write_packed(data, memoryview(offsets))
                    self._finish_shard()
                    start += count
        finally:
            # A journaled spool (written in place in the set's folder) stays
            # until the set is published: recovery deals the set from it.
            spool.discard()

    def abandon(self) -> None:
        """Stops writing without publishing anything, for a writer dropped
        without `close()`: a local set keeps what it wrote for
        `sackli.recover` (what a crash leaves); a remote one is aborted (a
        bucket keeps no unfinished write)."""
        if self._closed:
            return
        if not self._destination.keeps_unfinished:  # a bucket keeps no unfinished write
            self.abort()
            return
        self._closed = True
        try:
            self._gathered.flush()  # records handed over reach the disk too
        except Exception:
            pass
        for shard in (self._shard, self._spool):
            if isinstance(shard, BagShard):
                shard.abandon()
        self._shard = self._spool = None

    def abort(self) -> None:
        """Stops writing and deletes every file written so far; files of the
        set that were already published are deleted too. After a staged
        set's publish was decided, nothing: its staging is left for
        `sackli recover` to finish."""
        if self._decided:
            return
        self._closed = True
        self._destination.before_cleanup()
        shards = list(self._finished)
        for open_shard in (self._shard, self._spool):
            if open_shard is not None:
                shards.append(open_shard)
        self._shard = self._spool = None
        self._finished.clear()
        for shard in shards:
            try:
                shard.discard()
            except Exception:  # the files go anyway
                pass
        reached, self._published = self._published, []
        try:
            delete_objects(reached)
            removed = True
        except OSError:
            removed = False
        for path, old in reversed(self._replaced):
            try:
                if old is None:
                    delete_objects([path])
                else:
                    write_object(path, old)
            except OSError:
                pass
        self._replaced.clear()
        journal, self._journal = self._journal, None
        if journal is not None and not journal.in_place:
            journal.remove()  # in place, what was written stays for recovery
        manifest, self._manifest = self._manifest, None
        manifest_restored = True
        if manifest is not None:
            # Untouched, the old set is whole again under its old manifest;
            # with new shards removed, what is left has shards missing,
            # which readers report. New shards left behind (a removal
            # failed) keep the manifest "publishing": readers refuse them.
            try:
                if not reached:
                    manifest.roll_back()
                elif removed:
                    manifest.remove()
            except OSError:
                manifest_restored = False
        staging, self._staging = self._staging, None
        if staging is not None:
            if not manifest_restored:
                # The manifest may still say "publishing", naming the
                # journal: the staging stays, for `sackli recover` to decide.
                self._left_for_recovery = True
                return
            try:
                staging.remove()
            except OSError:
                pass  # `sackli recover` rolls it back
