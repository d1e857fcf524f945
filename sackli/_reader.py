"""`Reader`: random access to the records of a bag (one file or many shards)."""

from __future__ import annotations

import collections.abc
import operator
import os
import warnings
from typing import Any, Callable, Iterable, Iterator, Sequence, overload

from . import _engine
from ._engine import CorruptionError
from ._batching import records_per_batch
from ._options import Compression, LimitsStorage, ReaderOptions, stores_raw, with_overrides
from ._index_stream import IndexStream
from ._read_ahead import index_batches, iterate_range
from ._open_hints import with_open_hint
from ._unfinished import explained_missing
from ._shard_spec import expand_file_spec
from ._skipping import (
    SCAN_BATCH_BYTES, SkipHandler, checked_handler, read_skipping, resolved_indices,
)
from ._consistency import OpenCheck
from ._format import LIMITS_PREFIX, checksums_path_for
from ._storage import (
    TAIL_BYTES, TRAILER_BYTES, ObjectStat, base_name, opener_for, path_argument, remembering_listings,
    use_cache_engine,
)

__all__ = ["Reader", "checked_range", "reopened_with"]

# The read cache's entries are read by the engine (its remote byte sources
# and the cache's own reads share it).
use_cache_engine(_engine.BlockCache)


class _ClosedCore:
    """Stands in for the engine core of a closed reader: every use raises."""

    def __getattr__(self, name: str) -> Any:
        raise ValueError("I/O operation on a closed sackli.Reader")

    def __len__(self) -> int:
        raise ValueError("I/O operation on a closed sackli.Reader")


_CLOSED = _ClosedCore()


def _open_core(paths: list[str], options: ReaderOptions,
               listed: dict[str, ObjectStat] | None = None) -> Any:
    """The engine's reader of `paths` (canonical, from `expand_file_spec`).
    A missing file raises the engine's FileNotFoundError: callers explain
    it (`explained_missing`) once. `listed`: what the listings that found
    `paths` said of each object (`remembering_listings`), so that those
    open without a metadata request."""
    # Remote objects are recorded as they open, to check that they belong
    # together (a SEPARATE bag's two objects, a shard set's manifest).
    remote = opener_for(paths, options.cache_dir, options.cache_max_bytes,
                        options.remote_parallelism,
                        _records_objects(listed) if listed else None,
                        shared_cache=options.shared_cache,
                        # What the engine reads of each bag's end at open
                        # comes with its size, in one request.
                        tail_bytes=(TAIL_BYTES if options.limits_storage == LimitsStorage.IN_MEMORY
                                    else TRAILER_BYTES),
                        sidecar_of=_sidecar_rule(options.compression),
                        listed_names=frozenset(listed) if listed else frozenset())
    if remote is None:
        return _engine.open_reader(paths, options._engine_options, None)
    # The sets' manifests are read while the engine opens the shards (on
    # remote_parallelism threads): the open takes the round trips of one
    # shard, not of each in turn. remote_parallelism=1: one request at a time.
    check = OpenCheck(paths, prefetch=options.remote_parallelism > 1)
    core = _engine.open_reader(paths, options._engine_options, remote)
    opened, remote.opened = remote.opened or {}, None  # recorded for this check only
    check.check(opened)
    return core


def _sidecar_rule(compression: Compression) -> Callable[[str], str | None]:
    """The CRC-32C sidecar the engine looks for beside a bag read with
    `compression` (raw bags only; docs/format.md, section 12), or None."""
    return lambda url: checksums_path_for(url) if stores_raw(compression, url) else None


def _records_objects(listed: dict[str, ObjectStat]) -> dict[str, ObjectStat]:
    """The listed objects that may open without a HEAD: all but limits
    objects, whose metadata (which S3 listings do not carry) is checked
    against their records (`sackli._consistency`), and those listed
    without an identity to pin reads to."""
    return {url: stat for url, stat in listed.items()
            if stat.identity and not base_name(url).startswith(LIMITS_PREFIX)}


def _expand_remembering(spec: str) -> tuple[list[str], dict[str, ObjectStat]]:
    """`expand_file_spec(spec)`, and what its listings said of each object."""
    if ":" not in spec:  # no URL: nothing remote is listed (the common case, kept cheap)
        return expand_file_spec(spec), {}
    with remembering_listings() as listed:
        return expand_file_spec(spec), listed


def reopened_with(reader: "Reader", options: ReaderOptions) -> "Reader":
    """`reader` (its files and view) opened anew with `options`."""
    return _restore_reader(reader._file_spec, options, reader._paths, reader._core.view)


def _restore_reader(
    file_spec: str, options: ReaderOptions, paths: list[str], view: tuple[int, int, int]
) -> "Reader":
    """Unpickles a Reader: reopens its files and re-applies its view."""
    reader = Reader.__new__(Reader)
    try:
        core = _open_core(paths, options)
    except FileNotFoundError as error:
        raise explained_missing(error, ",".join(paths)) from None
    start, step, length = view
    if (start, step, length) != (0, 1, len(core)):
        core = _engine.ReaderCore(core.bag, start, step, length)
    reader._init(file_spec, options, paths, core)
    return reader


def checked_range(start: Any, num_records: Any, length: int) -> tuple[int, int]:
    """(start, num_records) as ints, a negative start counting from the end
    (as an index does); IndexError unless the range lies in [0, length]."""
    start, num_records = operator.index(start), operator.index(num_records)
    first = start + length if start < 0 else start
    if first < 0 or num_records < 0 or first + num_records > length:
        raise IndexError(
            f"range [{start}, {start + num_records}) out of range for a reader "
            f"of {length} records"
        )
    return first, num_records


class _ShardSizes(list):
    """`Reader.shard_sizes`: a list of ints that can still be called, as
    the method it once was (`reader.shard_sizes()`), with a warning."""

    def __call__(self) -> list[int]:
        warnings.warn("Reader.shard_sizes is a property, as paths and stored_bytes are: "
                      "write reader.shard_sizes, without the call", DeprecationWarning,
                      stacklevel=2)
        return list(self)


def _is_array(value: Any) -> bool:
    """Whether `value` is an array of indices (numpy and array-likes with
    `__array__`, or objects with the buffer protocol such as array.array),
    not bytes-like data."""
    if isinstance(value, (bytes, bytearray, memoryview, str)):
        return False
    if hasattr(type(value), "__array_interface__") or hasattr(type(value), "__array__"):
        return True
    try:
        memoryview(value)
    except TypeError:
        return False
    return True


def _as_value(value: Any) -> bytes | None:
    """`value` as bytes when it can equal a record, else None."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return None


class Reader(collections.abc.Sequence):
    """Opens a bag, one file or a set of shards, for random access.

    A Reader is an immutable sequence of `bytes`: `len(r)`, `r[i]` (negative
    indices too), `r[a:b:c]` (a Reader view sharing the open files, in O(1)),
    iteration with background read-ahead, and batch reads that run in
    parallel with the GIL released. It is safe to share across threads and
    can be pickled (the copy reopens the files).

    Args:
      file_spec: a path (`str` or `os.PathLike`), `name@N.ext`, `name@*.ext`,
        a glob (`ev*.bag`: the matching files, sorted), or a comma-separated
        list of those; each may start with `posix:`.
      options: a `Reader.Options`; keyword arguments override its fields,
        e.g. `Reader("x@4.bagz", sharding_layout=ShardingLayout.INTERLEAVED)`.

    Raises:
      FileNotFoundError: a file or shard does not exist (naming, when other
        shard counts of the name exist, those sets).
      sackli.CorruptionError: a file is not a valid bag (saying, when it
        can, what it is instead, e.g. a Parquet file, and how to convert it).
      IsADirectoryError: a folder (saying how to open it: a
        `sackli.datasets` folder, or a spec for the bags in it).
      ValueError / TypeError: a malformed spec or option.

    Example:
      >>> with sackli.Reader("data@8.bagz") as reader:
      ...     first, last = reader[0], reader[-1]
      ...     batch = reader.read_indices([5, 3, 5])
    """

    Options = ReaderOptions
    # Readers are opened by the thousand (one per shard, per worker): no
    # per-instance __dict__.
    __slots__ = ("_file_spec", "_options", "_paths", "_core", "__weakref__")

    def __init__(
        self,
        file_spec: str | os.PathLike[str],
        options: ReaderOptions | None = None,
        **option_overrides: Any,
    ) -> None:
        spec = path_argument(file_spec, "file_spec")
        resolved = with_overrides(ReaderOptions, options, option_overrides)
        try:
            paths, listed = _expand_remembering(spec)
        except FileNotFoundError as error:
            raise explained_missing(error, spec) from None
        try:
            core = _open_core(paths, resolved, listed)
        except FileNotFoundError as error:
            explained = explained_missing(error, ",".join(paths))
            if explained is error:  # no unfinished write: what else is there
                explained = with_open_hint(error, spec, paths)
            raise explained from None
        except (CorruptionError, IsADirectoryError) as error:
            # What the file or folder is instead, when that is known (only
            # now: a successful open sniffs nothing).
            hinted = with_open_hint(error, spec, paths)
            if hinted is error:
                raise
            raise hinted from None
        self._init(spec, resolved, paths, core)

    def _init(self, file_spec: str, options: ReaderOptions, paths: list[str], core: Any) -> None:
        self._file_spec = file_spec
        self._options = options
        self._paths = paths
        self._core = core

    def _view(self, core: Any) -> "Reader":
        view = Reader.__new__(Reader)
        view._init(self._file_spec, self._options, self._paths, core)
        return view

    # --- Properties -------------------------------------------------------

    @property
    def options(self) -> ReaderOptions:
        """The options the reader was opened with."""
        return self._options

    @property
    def file_spec(self) -> str:
        """The file spec the reader was opened with."""
        return self._file_spec

    @property
    def closed(self) -> bool:
        """Whether `close()` was called on this reader."""
        return self._core is _CLOSED

    @property
    def paths(self) -> tuple[str, ...]:
        """The files of the bag, in spec order (a view has its bag's files)."""
        return tuple(self._paths)

    @property
    def shard_sizes(self) -> list[int]:
        """The number of records in each file of `paths` (of the whole bag,
        also for a view), as a new list. Calling it, as the method it once
        was (`reader.shard_sizes()`), still works but warns."""
        return _ShardSizes(self._core.bag.shard_sizes())

    @property
    def stored_bytes(self) -> int:
        """Bytes of stored (possibly compressed) records in all the bag's
        files, limits excluded (of the whole bag, also for a view)."""
        return self._core.bag.records_bytes

    # --- Sequence ---------------------------------------------------------

    def __len__(self) -> int:
        return len(self._core)

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> "Reader": ...
    @overload
    def __getitem__(self, index: list[int] | range | Any) -> list[bytes]: ...

    def __getitem__(self, index: Any) -> Any:
        """`r[i]`: the record at i (negative counts from the end; IndexError
        outside the range). `r[a:b:c]`: a Reader view of those records.
        `r[[i, j, ...]]`, `r[range(...)]` or `r[array]` (a one-dimensional
        integer array, e.g. numpy): those records as a list, as
        `read_indices` returns them. Other index types raise TypeError."""
        return self._getitem_slow(index)

    # `r[i]` runs in the engine without a Python frame (installed below, as
    # a method of this class); slices, lists, arrays, other types and closed
    # readers reach `_getitem_slow`.

    def _getitem_slow(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self._view(self._core.slice(index))
        if isinstance(index, (list, range)):
            return self._core.read_indices(index)
        if _is_array(index):
            if getattr(index, "ndim", 1) == 0:  # a 0-d integer array is a scalar index
                return self._core.get(index)
            return self._core.read_indices(index)
        if not hasattr(type(index), "__index__"):
            raise TypeError(
                "reader indices must be integers, slices, lists of integers or "
                f"one-dimensional integer arrays, not {type(index).__name__}")
        return self._core.get(index)

    def __getitems__(self, indices: Sequence[int] | Any) -> list[bytes]:
        """The records at `indices` as a list: PyTorch's batched fetch
        (`DataLoader` calls it with the list of a batch's indices). The same
        as `read_indices`."""
        return self._core.read_indices(indices)

    def __iter__(self) -> Iterator[bytes]:
        """Iterates over all records, reading ahead in the background."""
        return iterate_range(
            self._core, 0, len(self._core), self._batch_records(),
            read_ahead=self._options.read_ahead_bytes > 0,
        )

    def __reversed__(self) -> "Reader":
        """A Reader view of the records from last to first (`self[::-1]`,
        as bagz and upstream Säckli return); iterate it for the records."""
        return self[::-1]

    def __contains__(self, value: object) -> bool:
        """Whether some record equals `value` (a scan in parallel batches).

        Scans (`in`, `index`, `count`) decode only records whose size, from
        the limits or the zstd frame header, equals len(value); a corrupt
        record is reported by a scan only when its size matches.
        """
        record = _as_value(value)
        return record is not None and self._core.find(record, 0, None) >= 0

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        """The index of the first record equal to `value` in [start, stop).

        `start` and `stop` are indices as for `list.index`. Raises ValueError
        when there is none.
        """
        record = _as_value(value)
        if record is not None:
            found = self._core.find(record, start, stop)
            if found >= 0:
                return found
        raise ValueError("value is not in the sackli.Reader")

    def count(self, value: Any) -> int:
        """The number of records equal to `value`."""
        record = _as_value(value)
        return 0 if record is None else self._core.count(record)

    # --- Batch reads ------------------------------------------------------

    # Every batch read is strict unless given `skip_corrupt`: a callable
    # (e.g. sackli.SkippedRecords()) that receives a sackli.SkippedRecord
    # for each record left out because it does not decode.

    def read(self, *, skip_corrupt: SkipHandler | None = None) -> list[bytes]:
        """All records of this reader (or view), read in parallel.

        `skip_corrupt`: leave out records that raise CorruptionError and
        report each to this callable (see `sackli.SkippedRecords`).
        """
        on_skip = checked_handler(skip_corrupt)
        if on_skip is None:
            return self._core.read_all()
        return read_skipping(self._core.read_range, len(self._core), self._scan_batch(), on_skip)

    def read_range(
        self, start: int, num_records: int, *, skip_corrupt: SkipHandler | None = None
    ) -> list[bytes]:
        """Records [start, start + num_records); IndexError outside the reader.

        `skip_corrupt`: as for `read`; indices reported are the reader's.
        """
        start, num_records = checked_range(start, num_records, len(self._core))
        on_skip = checked_handler(skip_corrupt)
        if on_skip is None:
            return self._core.read_range(start, num_records)
        return read_skipping(lambda first, n: self._core.read_range(start + first, n),
                             num_records, self._scan_batch(), on_skip, start.__add__)

    def read_range_iter(
        self, start: int, num_records: int, read_ahead: int | None = None, *,
        skip_corrupt: SkipHandler | None = None,
    ) -> Iterator[bytes]:
        """Iterates over records [start, start + num_records), reading ahead.

        `read_ahead` is how many records a background batch holds (default:
        about `options.read_ahead_bytes` worth). `skip_corrupt`: as for
        `read`, called in order, between the records around the skipped one
        (`read_range_iter(0, len(reader), skip_corrupt=...)` scans a whole
        reader).
        """
        start, num_records = checked_range(start, num_records, len(self._core))
        on_skip = checked_handler(skip_corrupt)
        batch = self._batch_records() if read_ahead is None else max(1, read_ahead)
        return iterate_range(
            self._core, start, start + num_records, batch,
            read_ahead=self._options.read_ahead_bytes > 0 or read_ahead is not None,
            on_skip=on_skip,
        )

    def read_indices(
        self, indices: Sequence[int] | slice | Any, *, skip_corrupt: SkipHandler | None = None
    ) -> list[bytes]:
        """The records at `indices`, in order (duplicates allowed).

        `indices`: a list, tuple, range, slice, or one-dimensional numpy array
        of any integer dtype; negative indices count from the end.
        `skip_corrupt`: as for `read` (a bad index still raises IndexError).
        """
        on_skip = checked_handler(skip_corrupt)
        if on_skip is None:
            return self._core.read_indices(indices)
        resolved = resolved_indices(indices, len(self._core))
        return read_skipping(lambda first, n: self._core.read_indices(resolved[first:first + n]),
                             len(resolved), self._scan_batch(), on_skip, resolved.__getitem__)

    def read_indices_iter(
        self, indices: Iterable[int], read_ahead: int | None = None, *,
        skip_corrupt: SkipHandler | None = None,
    ) -> IndexStream:
        """Iterates over the records at `indices`, any iterable (infinite
        generators too), reading ahead in parallel.

        Indices are pulled lazily, a batch ahead. An exception raised by the
        iterable, or a bad index, surfaces at the `next()` of its position.
        `skip_corrupt`: as for `read_range_iter`.

        The iterator keeps its position for checkpoints: `state_dict()` is a
        small dict, and `load_state_dict(state)` makes a new iterator over
        the same indices continue where that one stopped (docs/loaders.md,
        "Stream state").
        """
        on_skip = checked_handler(skip_corrupt)
        batch = self._batch_records() if read_ahead is None else max(1, read_ahead)
        core = self._core
        return IndexStream.over(
            indices, len(core),
            lambda chosen, counted_skip: index_batches(core, chosen, batch, counted_skip), on_skip)

    def approximate_bytes_per_record(self) -> float:
        """Stored (possibly compressed) bytes per record of the whole bag.

        Exact for the bag as opened; for a view it is the bag's figure.
        """
        return self._core.approximate_bytes_per_record()

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The records as an Arrow stream of one non-nullable `large_binary`
        column, `record` (the Arrow PyCapsule interface): `pyarrow.table(reader)`,
        `polars.from_arrow(reader)` and DuckDB read a Reader (or a view)
        directly, without pyarrow installed. The engine exports the stream
        itself; uncompressed mapped records are lent without a copy. The
        schema is fixed: `requested_schema` is ignored, as the interface
        allows (a consumer that wants another type casts). See
        `sackli.arrow.read_batches` for decoding records into columns.

        A record that fails to decode ends the stream with the consumer's
        error for invalid data (pyarrow: `ArrowInvalid`, a ValueError), whose
        message names the file and byte offset."""
        return self._core.arrow_c_stream()

    def _scan_batch(self) -> int:
        """Records per batch of a skipping scan."""
        return records_per_batch(SCAN_BATCH_BYTES, self._core.approximate_bytes_per_record())

    def _batch_records(self) -> int:
        return records_per_batch(self._options.read_ahead_bytes,
                                 self._core.approximate_bytes_per_record())

    # --- Life cycle -------------------------------------------------------

    def close(self) -> None:
        """Releases this reader's hold on the files; further use raises
        ValueError. Files close once no reader or view uses them."""
        self._core = _CLOSED

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        if self.closed:
            raise ValueError("cannot pickle a closed sackli.Reader")
        return (_restore_reader, (self._file_spec, self._options, self._paths, self._core.view))

    def __repr__(self) -> str:
        if self.closed:
            return f"<closed sackli.Reader({self._file_spec!r})>"
        start, step, length = self._core.view
        size = self._core.bag.size
        text = f"sackli.Reader({self._file_spec!r})"
        if (start, step, length) != (0, 1, size):
            stop = start + step * length
            stop_text = "" if stop < 0 else str(stop)
            text += f"[{start}:{stop_text}:{step}]"
        shards = self._core.bag.num_shards
        return f"<{text}: {length} records, {shards} shard{'s' if shards != 1 else ''}>"


_engine.install_reader_getitem(Reader)
