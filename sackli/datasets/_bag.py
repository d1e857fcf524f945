"""`BagWriter` / `BagReader`: single `bags` files on sackli's engine.

A `bags` file is the records, then the start offset of every record and the
end of the last one, as little-endian u64. Read as a Bagz file with TAIL
limits that is a bag whose record 0 is empty and whose record i + 1 is the
`bags` record i: so these classes are sackli.Writer / sackli.Reader with an
offset of one, and the engine does all reading and writing.
"""

from __future__ import annotations

import os
from typing import Any

from .. import CompressionNone, CompressionZstd, CorruptionError, LimitsStorage, Reader, Writer
from .._bulk import DEFAULT_MAX_RECORD_BYTES
from .._storage import path_argument, write_destination
from ._closing import ClosesOnExit, DiscardsOnError
from ._field_encoder import all_bytes

__all__ = ["BagReader", "BagWriter", "bags_file_bytes", "open_records"]

# Each record costs one u64 of limits; the leading empty record adds one more.
_LIMIT_BYTES = 8
# Records wait in a list and reach the engine in one call per this many
# bytes: one call per record would cost more than the copy.
_PENDING_BYTES = 4 << 20


def open_records(path: str, cache_index: bool = True, *,
                 max_record_bytes: int | None = DEFAULT_MAX_RECORD_BYTES, **cache: Any) -> Reader:
    """The `bags` records of the file at `path` as a sackli.Reader view
    (record 0 of the view is `bags` record 0). `cache`: the reader's
    `cache_dir` and `cache_max_bytes` options, when given; `max_record_bytes`
    the reader's (None: no cap).

    Raises FileNotFoundError when it is missing and sackli.CorruptionError
    when it is not a `bags` file (truncated, or its first record does not
    start at offset 0).
    """
    storage = LimitsStorage.IN_MEMORY if cache_index else LimitsStorage.ON_DISK
    reader = Reader(path, limits_storage=storage, max_record_bytes=max_record_bytes,
                    **{name: value for name, value in cache.items() if value is not None})
    # Every bags file holds the leading empty record (its first offset, 0).
    if len(reader) == 0 or len(reader[0]) != 0:
        raise CorruptionError(
            f"{path}: not a bags file: a bags file starts its first record at offset 0 "
            "and is at least 8 bytes long")
    return reader[1:]


class BagWriter(DiscardsOnError):
    """Writes one `bags` file (byte-identical to `bags.BagWriter`'s).

    The file appears at `path` only on `close()` (written under a temporary
    name, as sackli.Writer does); a `with` block that raises leaves nothing.
    Not thread-safe.

    Args:
      path: the file to create; it must not exist, its folder must. A
        `gs://` / `s3://` object is uploaded on `close()` (replacing one
        that exists).
      compression: None for raw records (the `bags` format, whatever the
        file is called), or a sackli.CompressionZstd to store every
        non-empty record as a zstd frame (a sackli extension: name the file
        `.bagz` so readers detect it).
      durable: fsync the file before the rename that publishes it, and its
        folder after (see sackli.Writer.Options).
      record_checksums: give a raw file a CRC-32C sidecar (`<name>.crc32c`,
        a sackli extension that `bags` ignores) that sackli's readers check
        every record against (see sackli.Writer.Options).

    Raises:
      FileExistsError: `path` exists.
    """

    def __init__(
        self, path: str | os.PathLike[str], compression: CompressionZstd | None = None,
        *, durable: bool = False, record_checksums: bool = False,
    ) -> None:
        self._path = path_argument(path, "path")
        # An object is replaced whole: only a local name counts as taken.
        if write_destination(self._path).occupied():
            raise FileExistsError(f"{self._path}: already exists")
        self._compressed = compression is not None
        self._writer = Writer(self._path, compression=compression or CompressionNone(),
                              durable=durable, record_checksums=record_checksums)
        # The leading empty record (see the module doc) goes first.
        self._pending: list[bytes] = [b""]
        self._pending_bytes = 0
        self._length = 0
        self._offset = 0

    @property
    def path(self) -> str:
        """The file being written."""
        return self._path

    @property
    def size(self) -> int:
        """The size of the file once closed, in bytes (for a compressed file,
        this waits for the records being compressed)."""
        if self._compressed:
            self._write_pending()
            stored = self._writer.bytes_written
        else:
            stored = self._offset
        return stored + _LIMIT_BYTES * self._length + _LIMIT_BYTES

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self._writer.closed

    def __len__(self) -> int:
        return self._length

    def append(self, record: bytes, flush: bool = True) -> int:
        """Appends one record (bytes) and returns its index. `flush` is
        accepted for `bags` compatibility; records reach the file on
        `flush()` and `close()`."""
        if type(record) is not bytes and not isinstance(record, bytes):
            raise TypeError(f"{self._path}: records must be bytes, not {type(record).__name__}")
        if self._writer.closed:
            raise ValueError(f"{self._path}: the BagWriter is closed")
        return self.append_checked(record)

    def extend(self, records: list[bytes]) -> None:
        """Appends records (bytes) in order."""
        if not all_bytes(records):
            raise TypeError(f"{self._path}: records must be bytes")
        if self._writer.closed:
            raise ValueError(f"{self._path}: the BagWriter is closed")
        self.extend_checked(records)

    def append_checked(self, record: bytes) -> int:
        """`append` for a record known to be bytes, to an open writer (a
        dataset writer's encoders check that; this skips the checks)."""
        self._pending.append(record)
        self._added(len(record), 1)
        return self._length - 1

    def extend_checked(self, records: list[bytes]) -> None:
        """`extend` for records known to be bytes, to an open writer."""
        self._pending.extend(records)
        self._added(sum(map(len, records)), len(records))

    def _added(self, nbytes: int, count: int) -> None:
        self._offset += nbytes
        self._length += count
        self._pending_bytes += nbytes
        if self._pending_bytes >= _PENDING_BYTES:
            self._write_pending()

    def _write_pending(self) -> None:
        if self._pending:
            self._writer.write_many(self._pending)
            self._pending = []
            self._pending_bytes = 0

    def flush(self) -> None:
        """Hands the records written so far to the operating system (the file
        itself appears on `close()`)."""
        self._write_pending()
        self._writer.flush()

    def close(self) -> None:
        """Finishes the file and moves it to `path`. Idempotent."""
        if not self._writer.closed:
            self._write_pending()
        self._writer.close()

    def discard(self) -> None:
        """Stops writing and deletes the temporary files; nothing appears."""
        self._writer._discard()

    def abandon(self) -> None:
        """Stops writing without publishing: the records appended so far are
        written where they are kept until `close()` (a local file's hidden
        folder), for `sackli.recover`, as a crash after a flush leaves them.
        For a writer dropped without `close()`."""
        if not self._writer.closed:
            self._write_pending()
        self._writer._abandon()

    def __repr__(self) -> str:
        return f"<sackli.datasets.BagWriter({self._path!r}): {self._length} records>"


def bags_file_bytes(records: Any) -> int:
    """The size of the `bags` file `records` (its engine Reader) reads: the
    stored records and an offset for each, plus the leading empty record's."""
    return records.stored_bytes + _LIMIT_BYTES * (len(records) + 1)


class BagReader(ClosesOnExit):
    """Reads one `bags` file: `len(r)`, `r.size`, `r[i]` (bytes; negative
    indices count from the end) and `r[range]` / `r[slice]` (a list; the
    stop is clipped to the end, as in `bags`). Thread-safe.

    Args:
      path: the file.
      cache_index: keep the offsets in memory (True) or read them from the
        file when needed (False).
      cache_dir: a local folder that keeps what is fetched from `gs://` /
        `s3://` objects (see `sackli.Reader.Options`; by default
        `SACKLI_CACHE_DIR`, or none).
      cache_max_bytes: the cache's budget (by default
        `SACKLI_CACHE_MAX_BYTES`, or 10 GiB).
      max_record_bytes: the most one record may be (default 4 GiB; None:
        no cap); a larger one raises sackli.RecordTooLargeError.

    Raises:
      FileNotFoundError: the file does not exist.
      sackli.CorruptionError: it is not a `bags` file.
    """

    def __init__(self, path: str | os.PathLike[str], cache_index: bool = True, *,
                 cache_dir: str | os.PathLike[str] | None = None,
                 cache_max_bytes: int | None = None,
                 max_record_bytes: int | None = DEFAULT_MAX_RECORD_BYTES) -> None:
        self._path = path_argument(path, "path")
        self._records = open_records(self._path, cache_index, cache_dir=cache_dir,
                                     cache_max_bytes=cache_max_bytes,
                                     max_record_bytes=max_record_bytes)
        self._size = bags_file_bytes(self._records)

    @property
    def path(self) -> str:
        """The file being read."""
        return self._path

    @property
    def size(self) -> int:
        """The file's size in bytes."""
        return self._size

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, (range, slice)):
            start, stop = _contiguous(index, len(self._records), self._path)
            return self._records.read_range(start, stop - start)
        return self._records[index]

    def read_indices(self, indices: Any) -> list[bytes]:
        """The records at `indices` (a list, range or integer array), read in
        one parallel engine batch."""
        return self._records.read_indices(indices)

    def close(self) -> None:
        """Releases the file."""
        self._records.close()

    def __repr__(self) -> str:
        return f"<sackli.datasets.BagReader({self._path!r}): {len(self)} records>"


def _contiguous(index: range | slice, length: int, where: str) -> tuple[int, int]:
    """[start, stop) of a step-1 range or slice, stop clipped to `length`."""
    start = 0 if index.start is None else index.start
    stop = length if index.stop is None else index.stop
    if index.step not in (None, 1) or start < 0 or stop < 0:
        raise ValueError(
            f"{where}: ranges must have start >= 0, stop >= 0 and step 1, not {index}")
    stop = min(stop, length)
    return min(start, stop), stop
