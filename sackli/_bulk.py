"""The internal bulk API: records as packed buffers, for sackli's own layers.

Who may use it: `sackli.arrow`, `sackli.beam`, `sackli.cli`,
`sackli.datasets`, `sackli.formats` and `sackli.maps` (one of core's
internal interface, with `_engine` and `_sets`), the shard-set writer,
benchmarks and tests. It is not public API (no stability promise);
it is where reads and writes in bulk reach a `Reader`'s or a `Writer`'s
engine core, so those classes keep no private methods that other modules
call. (`_index` also takes a reader's core: it hands it to the engine's
record index whole.)

Packed buffers: a read gives `(data, offsets)`, two objects with the buffer
protocol. `offsets` holds n + 1 int64 values; record k is
`data[offsets[k]:offsets[k + 1]]` (offsets are relative to `data`, so the
first one is `len(prefix)` for reads that take a prefix).

Ownership and lifetime: the buffers own (or keep alive) what they point at.
A mapped run lends the memory-mapped file itself: the buffers keep the
mapping open, and their bytes are the file's (read-only; a file replaced by
another process keeps its old bytes in the mapping). Callers may hold the
buffers as long as they like, e.g. wrap them in Arrow arrays without a
copy; they must never write to them.

Errors are the reader's and writer's: `IndexError` for positions outside
the reader (with the numbers), `sackli.CorruptionError` (naming the file
and offset) for records that do not decode, `OSError` for I/O, and
`ValueError` on a closed reader or writer. A pending read raises its error
from `.packed()`, not from the call that started it.

Also here for the other packages, defined (and documented) where each says:
batch sizes (`records_per_batch`, `batched`, `Gatherer`: `_batching`);
reading on past corrupt records (`read_skipping`: `_skipping`); the check
that `write_many` was not handed one record (`refuse_single_record`:
`_record_iterables`); the options records readers and writers are opened
with, the zstd level check, the default parallelism and the default cap on a
decoded record and its check (`ReaderOptions`, `WriterOptions`,
`check_zstd_level`, `default_parallelism`, `DEFAULT_MAX_RECORD_BYTES`,
`engine_byte_cap`: `_options`); what a record costs beyond its payload (`LIMIT_BYTES`,
`stored_bytes`: `_format`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._batching import Gatherer, batched, records_per_batch
from ._format import LIMIT_BYTES, stored_bytes
from ._options import (
    DEFAULT_MAX_RECORD_BYTES,
    ReaderOptions,
    ShardingLayout,
    WriterOptions,
    _default_parallelism as default_parallelism,
    check_zstd_level,
    engine_byte_cap,
)
from ._reader import checked_range
from ._record_iterables import refuse_single_record
from ._skipping import read_skipping

if TYPE_CHECKING:
    from ._reader import Reader
    from ._writer import Writer

__all__ = [
    "close_unpublished", "discard", "mapped_run", "publish", "read_packed", "reader_core",
    "record_offsets", "shard_boundaries", "start_read_indices", "start_read_range", "write_packed",
    # Defined elsewhere (see the module docstring).
    "DEFAULT_MAX_RECORD_BYTES", "LIMIT_BYTES", "Gatherer", "ReaderOptions", "WriterOptions", "batched",
    "check_zstd_level", "default_parallelism", "engine_byte_cap", "read_skipping", "records_per_batch",
    "refuse_single_record", "stored_bytes",
]


# --- Reading ------------------------------------------------------------------


def start_read_range(reader: "Reader", start: int, num_records: int, prefix: bytes = b"") -> Any:
    """Starts reading records [start, start + num_records) of `reader` in the
    engine's thread pool, into one buffer after `prefix`; returns a pending
    read whose `.packed()` waits and gives `(data, offsets)`.

    Raises IndexError at once for a range outside the reader.
    """
    start, num_records = checked_range(start, num_records, len(reader))
    return reader._core.start_read_range(start, num_records, prefix)


def start_read_indices(reader: "Reader", indices: Any, prefix: bytes = b"") -> Any:
    """As `start_read_range`, for the records at `indices` (a sequence or
    one-dimensional integer array; negative indices count from the end;
    repeats allowed). Raises IndexError at once for a bad index."""
    return reader._core.start_read_indices(indices, prefix)


def mapped_run(reader: "Reader", start: int, num_records: int) -> tuple[Any, Any] | None:
    """`(data, offsets)` lent straight from the memory-mapped file for
    records [start, start + num_records), or None when they are not stored
    that way (compressed, not mapped, in several files, a strided view):
    then read them with `start_read_range`."""
    return reader._core.mapped_run(start, num_records)


def reader_core(reader: "Reader") -> Any:
    """`reader`'s engine core, for the engine functions that read through
    one whole (`sackli.datasets`' datapoint reads)."""
    return reader._core


def read_packed(reader: "Reader", start: int, num_records: int) -> tuple[Any, Any]:
    """`(data, offsets)` of records [start, start + num_records): lent from
    the mapped file when they lie there uncompressed, else read and decoded
    into one new buffer."""
    return mapped_run(reader, start, num_records) or start_read_range(
        reader, start, num_records).packed()


def record_offsets(reader: "Reader", shard: int, first: int, count: int) -> memoryview:
    """Where records [first, first + count) of file `shard` of `reader`'s
    bag lie in that file's records section: count + 1 int64 offsets, the
    begin of record `first`, then each record's end. Reads only the limits
    it needs (also for remote files). For sackli.beam's byte positions."""
    return memoryview(reader._core.bag.record_offsets(shard, first, count))


def shard_boundaries(reader: "Reader") -> list[int] | None:
    """Positions in `reader` (a view too) where a new file starts, when
    neighbouring records of the view are neighbours on disk (step 1,
    concatenated layout, or a single file); None otherwise. Lets callers cut
    reads so that no piece spans two files."""
    start, step, length = reader._core.view
    if step != 1 or (
        reader.options.sharding_layout != ShardingLayout.CONCATENATED and len(reader.paths) > 1
    ):
        return None
    boundaries, first = [], 0
    for size in reader.shard_sizes:
        first += size
        if start < first < start + length:
            boundaries.append(first - start)
    return boundaries


# --- Writing ------------------------------------------------------------------


def write_packed(writer: "Writer", data: Any, offsets: Any) -> None:
    """Appends records data[offsets[k]:offsets[k + 1]] to `writer` in one
    call (`offsets`: a contiguous int64 buffer, n + 1 values), compressing
    in parallel. The engine copies what it needs before returning, so the
    caller may reuse `data` afterwards."""
    writer._core.write_packed(data, offsets)


def close_unpublished(writer: "Writer") -> None:
    """Finishes `writer`'s file but leaves it at `writer.partial_path` until
    `publish` (shard sets appear all at once)."""
    writer._core.close(publish=False)


def publish(writer: "Writer", target: str, sync_folder: bool = True) -> None:
    """After `close_unpublished`: renames the finished file (and its limits
    file, for SEPARATE placement) onto local `target`; for a durable writer,
    then fsyncs the folder unless `sync_folder` is False (a set syncs its
    folders once, after its last file)."""
    writer._core.publish(target, sync_folder=sync_folder)


def discard(writer: "Writer") -> None:
    """Stops writing and deletes `writer`'s temporary files (and a remote
    writer's spool); the target is left as it was."""
    writer._discard()
