"""Writing one output spec: a single bag, `name@N.ext` or `name@*.ext`.

`name@N.ext` holds contiguous runs of records, as even as possible; that
needs the number of records up front. When it is not known (a stream), the
records go to an uncompressed spool file first and are split from there.
`name@*.ext` starts a new shard whenever the next records would take a shard
past `max_shard_bytes`; shards are written under temporary names and renamed
to `name-0000i-of-0000N.ext` once N is known. Whatever goes wrong, no file
is left behind under a final name.
"""

from __future__ import annotations

import bisect
import os
from typing import Any

from . import _engine
from ._options import CompressionNone, LimitsPlacement, WriterOptions
from ._reader import Reader
from ._shard_spec import split_shard_entry, shard_name, strip_local_prefix
from ._storage import is_remote
from ._writer import Writer

__all__ = ["ShardSetWriter", "even_split"]

# Bytes a record costs in a bag beyond its payload: its limit.
_LIMIT_BYTES = 8
# The spool is copied out this many records, or about this many bytes, at a
# time (compressed records of one write are held until it returns).
_SPOOL_COPY_RECORDS = 4096
_SPOOL_COPY_BYTES = 16 << 20


def even_split(total: int, shards: int) -> list[int]:
    """Record counts of `shards` contiguous runs of `total` records, as even
    as possible (they differ by at most one, larger first)."""
    base, extra = divmod(total, shards)
    return [base + (1 if shard < extra else 0) for shard in range(shards)]


def files_of(path: str) -> list[str]:
    """The files a Writer of `path` may create: the bag and its limits file."""
    return [path, _engine.limits_path_for(path)]


class ShardSetWriter:
    """Writes batches of records laid out together (`data`, int64 `offsets`)
    to the files of `file_spec`.

    Args:
      file_spec: `path`, `name@N.ext` or `name@*.ext` (the latter with
        `max_shard_bytes`).
      options: the options of every shard's Writer.
      num_records: how many records will come, when known (for `@N`).
      max_shard_bytes: for `@*`: the most bytes a shard should take (stored
        records and limits); a record larger than that gets a shard alone.
    """

    def __init__(
        self,
        file_spec: str,
        options: WriterOptions,
        num_records: int | None = None,
        max_shard_bytes: int | None = None,
    ) -> None:
        spec = strip_local_prefix(file_spec)
        if "," in spec:
            raise ValueError(f"{file_spec}: write to one path or one shard spec, not a list")
        self._options = options
        self._created: list[str] = []
        self._writer: Writer | None = None
        self._records = 0
        self._shard_index = 0
        sharded = split_shard_entry(spec)
        if sharded is not None and is_remote(spec):
            raise ValueError(
                f"{file_spec}: writing shard sets to gs:// or s3:// is not supported here "
                "yet; write each shard with sackli.Writer, or use sackli.beam.WriteToSackli"
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
        self._spool: str | None = None
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
                    self._spool = f"{base}.sackli-spool-{os.getpid()}.bag"
                    self._counts = [None]
                else:
                    self._counts = list(even_split(num_records, n))
        if not is_remote(spec) and os.path.dirname(spec) and not os.path.isdir(os.path.dirname(spec)):
            raise FileNotFoundError(2, f"{file_spec}: the folder does not exist",
                                    os.path.dirname(spec))
        self._ratio = 1.0  # stored bytes per payload byte, learnt as we write
        self._payload = 0  # payload bytes written to the open shard

    @property
    def records_written(self) -> int:
        """Records written so far."""
        return self._records

    # --- Writing ------------------------------------------------------------

    def write_packed(self, data: Any, offsets: memoryview) -> None:
        """Writes records data[offsets[k]:offsets[k + 1]], k < len(offsets) - 1."""
        first, last = 0, len(offsets) - 1
        while first < last:
            writer = self._current_writer()
            take = self._records_that_fit(writer, offsets, first, last)
            piece = offsets[first:first + take + 1]
            writer._write_packed(data, piece)
            self._payload += piece[-1] - piece[0]
            if self._payload:
                self._ratio = max(writer.bytes_written / self._payload, 1e-3)
            self._records += take
            first += take
            if first < last or self._shard_full(writer):
                self._finish_shard()

    def _current_writer(self) -> Writer:
        if self._writer is None:
            path = self._next_path()
            spooling = path == self._spool
            self._writer = self._open(path, spool_options() if spooling else None)
            self._payload = 0
        return self._writer

    def _next_path(self) -> str:
        if self._spool is not None:
            return self._spool
        if self._max_shard_bytes is not None:
            return self._temp_name(self._shard_index)
        if self._shard_index >= len(self._paths):
            raise ValueError(
                f"more records than announced ({sum(c or 0 for c in self._counts)})")
        return self._paths[self._shard_index]

    def _temp_name(self, index: int) -> str:
        return f"{self._base}-{index:05d}-of-pending{self._suffix}"

    def _open(self, path: str, options: WriterOptions | None = None) -> Writer:
        self._created.extend(files_of(path))
        return Writer(path, options or self._options)

    def _records_that_fit(self, writer: Writer, offsets: memoryview, first: int, last: int) -> int:
        """How many of records [first, last) go to the open shard now."""
        if self._spool is None and self._max_shard_bytes is None:
            count = self._counts[self._shard_index]
            if count is None:
                return last - first
            return min(last - first, count - writer.records_written)
        if self._max_shard_bytes is None:
            return last - first  # the spool takes everything
        used = writer.bytes_written + _LIMIT_BYTES * writer.records_written
        budget = self._max_shard_bytes - used
        ratio, base = self._ratio, offsets[first]

        def cost(end: int) -> float:
            return ratio * (offsets[end] - base) + _LIMIT_BYTES * (end - first)

        end = max(first, bisect.bisect_right(range(first, last + 1), budget, key=cost) - 1 + first)
        if end == first and writer.records_written == 0:
            end = first + 1  # a record too large for any shard gets one alone
        return end - first

    def _shard_full(self, writer: Writer) -> bool:
        if self._spool is not None or self._max_shard_bytes is None:
            count = None if self._spool is not None else self._counts[self._shard_index]
            return count is not None and writer.records_written >= count
        return writer.bytes_written + _LIMIT_BYTES * writer.records_written >= self._max_shard_bytes

    def _finish_shard(self) -> None:
        if self._writer is None:
            return
        writer, self._writer = self._writer, None
        writer.close()
        if self._spool is None:
            self._shard_index += 1

    # --- Finishing ----------------------------------------------------------

    def close(self) -> list[str]:
        """Finishes every file (creating empty shards where no record went);
        returns the paths of the shards."""
        try:
            if self._spool is not None:
                self._finish_shard()
                self._split_spool()
            elif self._max_shard_bytes is not None:
                if self._writer is not None or self._shard_index == 0:
                    self._current_writer()
                    self._finish_shard()
                self._rename_temp_shards()
            else:
                while self._shard_index < len(self._paths):
                    self._current_writer()
                    self._finish_shard()
                if None not in self._counts and self._records != sum(self._counts):
                    raise ValueError(f"{self._records} records came, "
                                     f"{sum(self._counts)} were announced")
        except BaseException:
            self.abort()
            raise
        return list(self._paths)

    def _split_spool(self) -> None:
        assert self._spool is not None
        spool, self._spool = self._spool, None
        if not os.path.exists(spool):  # no record came: only empty shards
            self._counts = [0] * len(self._paths)
            while self._shard_index < len(self._paths):
                self._current_writer()
                self._finish_shard()
            return
        with Reader(spool) as records:
            per_record = max(records.approximate_bytes_per_record(), 1.0)
            step = max(1, min(_SPOOL_COPY_RECORDS, int(_SPOOL_COPY_BYTES / per_record)))
            counts = even_split(len(records), len(self._paths))
            self._counts = list(counts)
            start = 0
            for path, count in zip(self._paths, counts):
                with self._open(path) as writer:
                    for first in range(start, start + count, step):
                        n = min(step, start + count - first)
                        data, offsets = records._read_packed(first, n)
                        writer._write_packed(data, memoryview(offsets))
                start += count
                self._shard_index += 1
        for file in files_of(spool):
            _remove_quietly(file)

    def _rename_temp_shards(self) -> None:
        count = self._shard_index
        self._paths = [shard_name(self._base, i, count, self._suffix) for i in range(count)]
        for i, final in enumerate(self._paths):
            for temp_file, final_file in zip(files_of(self._temp_name(i)), files_of(final)):
                if os.path.exists(temp_file):
                    os.replace(temp_file, final_file)
                    self._created.append(final_file)

    def abort(self) -> None:
        """Closes and deletes every file written so far."""
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception:  # the files go anyway
                pass
        for path in self._created:
            _remove_quietly(path)
        self._created.clear()

    def __enter__(self) -> "ShardSetWriter":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is not None:
            self.abort()


def spool_options() -> WriterOptions:
    """Options of a spool file: fast to write and read back."""
    return WriterOptions(compression=CompressionNone(), limits_placement=LimitsPlacement.TAIL)


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
