"""`ShardedWriter`: writes a single bag, `name@N.ext` or `name@*.ext`.

`name@N.ext` holds contiguous runs of records, as even as possible; that
needs the number of records up front. When it is not known (a stream), the
records go to an uncompressed spool file first and are split from there.
`name@*.ext` starts a new shard whenever the next records would take a shard
past `max_shard_bytes`. Every shard is written by an atomic `Writer` that is
finished but not renamed until the whole set is complete: the set appears
all at once at `close()`, and whatever goes wrong, no file is left behind
under a final name.
"""

from __future__ import annotations

import array
import bisect
import itertools
import os
from typing import Any, Iterable

from . import _bulk
from ._batching import records_per_batch
from ._format import limits_path_for, stored_bytes
from ._options import CompressionNone, LimitsPlacement, WriterOptions, with_overrides
from ._reader import Reader
from ._shard_spec import split_shard_entry, shard_name, strip_local_prefix
from ._storage import is_remote
from ._writer import Record, Writer

__all__ = ["ShardedWriter", "even_split", "files_of"]

# The spool is copied out this many records, or about this many bytes, at a
# time (compressed records of one write are held until it returns).
_SPOOL_COPY_RECORDS = 4096
_SPOOL_COPY_BYTES = 16 << 20
# write() and write_many() gather records up to this many (or bytes) before
# handing them on in one packed batch.
_GATHER_RECORDS = 4096
_GATHER_BYTES = 4 << 20


def even_split(total: int, shards: int) -> list[int]:
    """Record counts of `shards` contiguous runs of `total` records, as even
    as possible (they differ by at most one, larger first)."""
    base, extra = divmod(total, shards)
    return [base + (1 if shard < extra else 0) for shard in range(shards)]


def files_of(path: str) -> list[str]:
    """The files a bag at `path` may consist of: the bag and its limits file."""
    return [path, limits_path_for(path)]


class ShardedWriter:
    """Writes records to one bag or to a shard set, atomically.

    Args:
      file_spec: a path (`str` or `os.PathLike`), `name@N.ext` (N shards
        of contiguous runs of records, as even as possible) or `name@*.ext`
        (as many shards as `max_shard_bytes` needs, named
        `name-0000i-of-0000N.ext` once N is known). Local paths only.
      options: a `Writer.Options` for every shard; keyword arguments
        override its fields (e.g. `limits_placement=...`).
      max_shard_bytes: with `name@*.ext` (and only then): the most bytes a
        shard should take (stored records and limits); a record larger than
        that gets a shard alone.
      num_records: for `name@N.ext`, how many records will come, when known;
        otherwise they go to a spool file first and are split at `close()`.

    Every file is written under a temporary name and the whole set is
    renamed into place at `close()`: a reader or a glob sees the old files
    or the complete new set, never part of one. A `with` block that raises
    (or `abort()`) leaves nothing behind. Not thread-safe.

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
        **option_overrides: Any,
    ) -> None:
        raw = os.fspath(file_spec)
        if not isinstance(raw, str):
            raise TypeError(f"file_spec must be a str or os.PathLike[str], not {type(raw).__name__}")
        options = with_overrides(WriterOptions, options, option_overrides)
        spec = strip_local_prefix(raw)
        if "," in spec:
            raise ValueError(f"{file_spec}: write to one path or one shard spec, not a list")
        for name, value in (("max_shard_bytes", max_shard_bytes), ("num_records", num_records)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if num_records is not None and num_records < 0:
            raise ValueError(f"num_records must be >= 0, not {num_records}")
        self._spec = spec
        self._options = options
        self._writer: Writer | None = None
        self._finished: list[tuple[Writer, str | None]] = []  # (writer, target)
        self._published: list[str] = []
        self._gathered: list[Any] = []
        self._gathered_bytes = 0
        self._closed = False
        self._records = 0
        self._shard_index = 0
        sharded = split_shard_entry(spec)
        if is_remote(spec):
            raise ValueError(
                f"{file_spec}: writing shard sets to gs:// or s3:// is not supported here "
                "yet; write each object with sackli.Writer, or use sackli.beam.WriteToSackli"
            )
        by_size = sharded is not None and sharded[1] == "*"
        if by_size != (max_shard_bytes is not None):
            raise ValueError(
                f"{file_spec}: max_shard_bytes goes with a 'name@*.ext' spec, and only "
                "with it ('name@N.ext' makes N shards, a plain path one file)"
            )
        if max_shard_bytes is not None and max_shard_bytes <= 0:
            raise ValueError(f"max_shard_bytes must be > 0, not {max_shard_bytes}")
        self._max_shard_bytes = max_shard_bytes
        self._spooling = False
        if sharded is None:
            self._paths = [spec]
            self._counts: list[int | None] = [None]
        else:
            base, count, suffix = sharded
            self._base, self._suffix = base, suffix
            if by_size:
                self._paths, self._counts = [], []
            else:
                n = int(count)
                self._paths = [shard_name(base, i, n, suffix) for i in range(n)]
                if num_records is None:
                    self._spooling = True
                    self._counts = [None]
                else:
                    self._counts = list(even_split(num_records, n))
        folder = os.path.dirname(spec)
        if folder and not os.path.isdir(folder):
            raise FileNotFoundError(2, f"{file_spec}: the folder does not exist", folder)
        self._ratio = 1.0  # stored bytes per payload byte, learnt as we write
        self._payload = 0  # payload bytes written to the open shard

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

    def write(self, record: Record) -> None:
        """Appends one record: bytes, str (UTF-8) or any bytes-like object."""
        self.write_many((record,))

    def write_many(self, records: Iterable[Record]) -> None:
        """Appends records in order."""
        self._check_open()
        for record in records:
            if isinstance(record, str):
                record = record.encode()
            elif not isinstance(record, bytes):
                try:
                    record = memoryview(record).cast("B")
                except TypeError:
                    raise TypeError(
                        f"a record must be bytes, str or a bytes-like object, not {type(record).__name__}"
                    ) from None
            self._gathered.append(record)
            self._gathered_bytes += len(record)
            if len(self._gathered) >= _GATHER_RECORDS or self._gathered_bytes >= _GATHER_BYTES:
                self._write_gathered()

    def _write_gathered(self) -> None:
        if not self._gathered:
            return
        records, self._gathered, self._gathered_bytes = self._gathered, [], 0
        offsets = array.array("q", [0])
        offsets.extend(itertools.accumulate(map(len, records)))
        self.write_packed(b"".join(records), memoryview(offsets))

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("write to a closed sackli.ShardedWriter")

    def write_packed(self, data: Any, offsets: memoryview) -> None:
        """Writes records data[offsets[k]:offsets[k + 1]], k < len(offsets) - 1
        (`offsets`: a contiguous int64 buffer), for callers that hold records
        laid out together (sackli.arrow)."""
        self._check_open()
        if self._gathered:
            self._write_gathered()
        first, last = 0, len(offsets) - 1
        while first < last:
            writer = self._current_writer()
            take = self._records_that_fit(writer, offsets, first, last)
            piece = offsets[first:first + take + 1]
            _bulk.write_packed(writer, data, piece)
            self._payload += piece[-1] - piece[0]
            if self._payload:
                self._ratio = max(writer.bytes_written / self._payload, 1e-3)
            self._records += take
            first += take
            if first < last or self._shard_full(writer):
                self._finish_shard()

    def _current_writer(self) -> Writer:
        if self._writer is None:
            if self._spooling:
                path = f"{self._base}.sackli-spool{self._suffix}.bag"
                self._writer = Writer(path, spool_options())
            else:
                self._writer = Writer(self._next_path(), self._options)
            self._payload = 0
        return self._writer

    def _next_path(self) -> str:
        if self._max_shard_bytes is not None:
            # Named once the count is known; this name only labels its
            # temporary folder.
            return f"{self._base}-{self._shard_index:05d}-of-pending{self._suffix}"
        if self._shard_index >= len(self._paths):
            raise ValueError(
                f"more records than announced ({sum(c or 0 for c in self._counts)})")
        return self._paths[self._shard_index]

    def _records_that_fit(self, writer: Writer, offsets: memoryview, first: int, last: int) -> int:
        """How many of records [first, last) go to the open shard now."""
        if not self._spooling and self._max_shard_bytes is None:
            count = self._counts[self._shard_index]
            if count is None:
                return last - first
            return min(last - first, count - writer.records_written)
        if self._max_shard_bytes is None:
            return last - first  # the spool takes everything
        used = stored_bytes(writer.bytes_written, writer.records_written)
        budget = self._max_shard_bytes - used
        ratio, base = self._ratio, offsets[first]

        def cost(end: int) -> float:
            return stored_bytes(ratio * (offsets[end] - base), end - first)

        end = max(first, bisect.bisect_right(range(first, last + 1), budget, key=cost) - 1 + first)
        if end == first and writer.records_written == 0:
            end = first + 1  # a record too large for any shard gets one alone
        return end - first

    def _shard_full(self, writer: Writer) -> bool:
        if self._spooling or self._max_shard_bytes is None:
            count = None if self._spooling else self._counts[self._shard_index]
            return count is not None and writer.records_written >= count
        return stored_bytes(writer.bytes_written, writer.records_written) >= self._max_shard_bytes

    def _finish_shard(self) -> None:
        """Finishes the open shard under its temporary name."""
        if self._writer is None:
            return
        writer, self._writer = self._writer, None
        self._finished.append((writer, None))
        _bulk.close_unpublished(writer)
        if not self._spooling:
            self._shard_index += 1

    # --- Finishing ----------------------------------------------------------

    def close(self) -> list[str]:
        """Finishes every file (creating empty shards where no record went),
        then renames the whole set into place; returns the paths of the
        files, in order. Idempotent."""
        if self._closed:
            return self.paths
        try:
            self._write_gathered()
            if self._spooling:
                self._finish_shard()
                self._split_spool()
            elif self._max_shard_bytes is not None:
                if self._writer is not None or self._shard_index == 0:
                    self._current_writer()
                    self._finish_shard()
                count = self._shard_index
                self._paths = [shard_name(self._base, i, count, self._suffix) for i in range(count)]
            else:
                while self._shard_index < len(self._paths):
                    self._current_writer()
                    self._finish_shard()
                if None not in self._counts and self._records != sum(self._counts):
                    raise ValueError(f"{self._records} records came, "
                                     f"{sum(self._counts)} were announced")
            shards = [writer for writer, _ in self._finished]
            for writer, target in zip(shards, self._paths):
                _bulk.publish(writer, target)
                self._published.append(target)
        except BaseException:
            self.abort()
            raise
        self._closed = True
        return self.paths

    def _split_spool(self) -> None:
        """Copies the spooled records into the shards."""
        self._spooling = False
        if not self._finished:  # no record came: only empty shards
            self._counts = [0] * len(self._paths)
            for _ in self._paths:
                self._current_writer()
                self._finish_shard()
            return
        (spool, _), = self._finished
        self._finished.clear()
        try:
            with Reader(spool.partial_path) as records:
                step = records_per_batch(_SPOOL_COPY_BYTES, records.approximate_bytes_per_record(),
                                         _SPOOL_COPY_RECORDS)
                self._counts = list(even_split(len(records), len(self._paths)))
                start = 0
                for count in self._counts:
                    writer = self._current_writer()
                    for first in range(start, start + count, step):
                        n = min(step, start + count - first)
                        data, offsets = _bulk.read_packed(records, first, n)
                        _bulk.write_packed(writer, data, memoryview(offsets))
                    self._finish_shard()
                    start += count
        finally:
            _bulk.discard(spool)

    def abort(self) -> None:
        """Stops writing and deletes every file written so far; files of the
        set that were already renamed into place are deleted too."""
        self._closed = True
        writers = [writer for writer, _ in self._finished]
        if self._writer is not None:
            writers.append(self._writer)
            self._writer = None
        self._finished.clear()
        for writer in writers:
            try:
                _bulk.discard(writer)
            except Exception:  # the files go anyway
                pass
        for path in self._published:
            for file in files_of(path):
                _remove_quietly(file)
        self._published.clear()

    def __enter__(self) -> "ShardedWriter":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self._records} records"
        return f"<sackli.ShardedWriter({self._spec!r}): {state}>"


def spool_options() -> WriterOptions:
    """Options of a spool file: fast to write and read back."""
    return WriterOptions(compression=CompressionNone(), limits_placement=LimitsPlacement.TAIL)


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
