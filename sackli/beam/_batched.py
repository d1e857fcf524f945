"""`ReadFromSackliBatched`: bag records as batches, not one element each.

Beam spends about 10 µs per element; a read of small records is mostly
that. Batches (Arrow RecordBatches through `sackli.arrow`, or plain lists of
bytes) pay it once per few thousand records, as Beam's
`ReadFromParquetBatched` does per row group.

Files split into byte ranges exactly as `ReadFromSackli` splits them (see
`_source`); a range yields the batches of the records whose positions fall
inside it. A batch is claimed by its first record and reported up to its
last (see `_claimed`), so once a batch is out no dynamic split can move any
of its records to another range; when a split has cut a batch, only the
records before the new end are emitted.
"""

from __future__ import annotations

import bisect
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa
from apache_beam import coders
from apache_beam.io import range_trackers
from apache_beam.transforms import display

from .._batching import records_per_batch
from .._bulk import record_offsets
from .._format import LIMIT_BYTES
from .._options import ReaderOptions
from .._reader import Reader
from ._display import read_display_data
from ._source import FileSource, PatternSource, first_at_or_after

__all__ = ["ArrowBatchCoder", "BatchedPatternSource", "RAW", "batched_source", "read_batches_of_range"]

# `decode=RAW` yields lists of bytes instead of RecordBatches.
RAW = "raw"
# A batch holds about this many stored bytes (at most _MAX_BATCH records).
_BATCH_BYTES = 8 << 20
_MAX_BATCH = 65536


class ArrowBatchCoder(coders.Coder):
    """`pyarrow.RecordBatch`es as Arrow IPC streams (schema + one batch), so
    runners move batches between workers without pickling them."""

    def encode(self, batch: pa.RecordBatch) -> bytes:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        return sink.getvalue().to_pybytes()

    def decode(self, encoded: bytes) -> pa.RecordBatch:
        return pa.ipc.open_stream(encoded).read_next_batch()

    def is_deterministic(self) -> bool:
        return False

    def to_type_hint(self) -> type:
        return pa.RecordBatch


def _positions(reader: Reader, first: int, count: int) -> list[int]:
    """Positions of records [first, first + count) (see `_source`)."""
    begins = record_offsets(reader, 0, first, count)
    return [begins[k] + LIMIT_BYTES * (first + k) for k in range(count)]


def _raw_batches(reader: Reader, batch_size: int) -> Iterator[list[bytes]]:
    for start in range(0, len(reader), batch_size):
        yield reader.read_range(start, min(batch_size, len(reader) - start))


def _length(batch: Any) -> int:
    """Records in a batch: a list of bytes or a RecordBatch."""
    return len(batch) if isinstance(batch, list) else batch.num_rows


def _claimed(batch: Any, first: int, reader: Reader, tracker: Any) -> Any:
    """`batch` (records first.. of `reader`) cut to what `tracker` lets this
    range emit, or None when nothing is left.

    The batch's first record is claimed (a split point); the others are
    reported with `set_current_position`, which bars splits at or before
    them, and then only records before the tracker's end are kept: a split
    that landed between reading the end and reporting the position shows
    in the end read after it, and none can land before them afterwards."""
    count = _length(batch)
    positions = _positions(reader, first, count)
    if not tracker.try_claim(positions[0]):
        return None
    keep = bisect.bisect_left(positions, tracker.stop_position())
    if keep > 1:
        tracker.set_current_position(positions[keep - 1])
        keep = min(keep, bisect.bisect_left(positions, tracker.stop_position()))
    keep = max(keep, 1)  # the claimed first record is ours whatever happens
    if keep == count:
        return batch
    return batch[:keep] if isinstance(batch, list) else batch.slice(0, keep)


def read_batches_of_range(
    path: str, options: ReaderOptions, tracker: Any, make_batches: Callable[[Reader], Iterator[Any]]
) -> Iterator[Any]:
    """Yields the batches `make_batches(view)` gives for the records of
    `path` whose positions lie in the tracker's range (`view` is a Reader of
    exactly those records), each claimed as the module docstring says."""
    with Reader(path, options) as reader:
        first = first_at_or_after(reader, tracker.start_position())
        last = first_at_or_after(reader, tracker.stop_position())
        if first == last:
            return
        begin = first
        for batch in make_batches(reader[first:last]):
            out = _claimed(batch, begin, reader, tracker)
            if out is None:
                return
            yield out
            if out is not batch:
                return
            begin += _length(batch)


class _BatchedFileSource(FileSource):
    """One bag file read in batches."""

    def __init__(self, file: Any, options: ReaderOptions, batches: "_BatchMaker") -> None:
        super().__init__(file, options, coders.BytesCoder(), False)
        self._batches = batches

    def read(self, range_tracker: range_trackers.OffsetRangeTracker) -> Iterator[Any]:
        return read_batches_of_range(self._file.path, self._options, range_tracker, self._batches)

    def default_output_coder(self) -> coders.Coder:
        return self._batches.coder()


class _BatchMaker:
    """Makes the batches of a Reader view: `decode` RAW gives lists of bytes,
    anything else goes to `sackli.arrow.read_batches` (None, "arrow",
    "json" or a function; `columns`, `schema` as there)."""

    def __init__(self, decode: Any, columns: Sequence[str] | None, schema: pa.Schema | None,
                 batch_size: int | None) -> None:
        if decode == RAW and (columns is not None or schema is not None):
            raise ValueError("decode='raw' yields records as bytes: columns= and schema= need "
                             "decode='arrow' or 'json'")
        self.decode, self.columns, self.schema, self.batch_size = decode, columns, schema, batch_size

    def __call__(self, view: Reader) -> Iterator[Any]:
        size = self.batch_size or records_per_batch(
            _BATCH_BYTES, view.approximate_bytes_per_record(), _MAX_BATCH)
        if self.decode == RAW:
            return _raw_batches(view, size)
        import sackli.arrow  # only batched Arrow reads need pyarrow's bridge

        return iter(sackli.arrow.read_batches(
            view, decode=self.decode, columns=self.columns, schema=self.schema, batch_size=size))

    def coder(self) -> coders.Coder:
        if self.decode == RAW:
            return coders.ListCoder(coders.BytesCoder())
        return ArrowBatchCoder()


class BatchedPatternSource(PatternSource):
    """Every file of a pattern, read in batches."""

    def __init__(self, pattern: str, options: ReaderOptions, batches: _BatchMaker,
                 empty_match_treatment: str) -> None:
        super().__init__(pattern, options, coders.BytesCoder(), False, empty_match_treatment)
        self._batches = batches

    def _file_sources(self) -> list[FileSource]:
        return [_BatchedFileSource(f, self._options, self._batches) for f in self._files()]

    def default_output_coder(self) -> coders.Coder:
        return self._batches.coder()

    def display_data(self) -> dict[str, Any]:
        batches = self._batches
        decode = batches.decode if isinstance(batches.decode, (str, type(None))) else repr(batches.decode)
        data = read_display_data(
            self._options, self.default_output_coder(), False,
            file_pattern=self._pattern, empty_match_treatment=self._empty_match_treatment,
            decode=str(decode), batch_size=batches.batch_size or "about 8 MiB",
        )
        if batches.columns is not None:
            data["columns"] = display.DisplayDataItem(", ".join(batches.columns), label="Columns")
        return data


def batched_source(
    file_pattern: str, decode: Any, columns: Sequence[str] | None, schema: pa.Schema | None,
    batch_size: int | None, options: ReaderOptions, empty_match_treatment: str,
) -> BatchedPatternSource:
    """The source behind `ReadFromSackliBatched` (arguments checked there)."""
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                   or batch_size < 1):
        raise ValueError(f"batch_size must be an int >= 1, not {batch_size!r}")
    return BatchedPatternSource(file_pattern, options,
                                _BatchMaker(decode, columns, schema, batch_size),
                                empty_match_treatment)
