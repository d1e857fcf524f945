"""`ReadFromSackliBatched`: bag records as batches, not one element each.

Beam spends about 10 µs per element; a read of small records is mostly
that. Batches (Arrow RecordBatches through `sackli.arrow`, or plain lists of
bytes) pay it once per few thousand records, as Beam's
`ReadFromParquetBatched` does per row group.

Each file is cut into batches on a grid of its own: batch k holds records
[k * size, (k + 1) * size), `size` fixed per file (`batch_size`, or about
8 MiB at the file's average record size), whatever range reads it. Files
split into byte ranges exactly as `ReadFromSackli` splits them (see
`_source`), and a batch belongs to the range that holds its first record's
position, as a block of an Avro file does: a range yields the whole
batches that start inside it (the last may run past its end), and claims
each at that position. A split anywhere, initial or dynamic, then moves
whole batches only: the primary and the residual read exactly the batches
the unsplit range reads, and every record is in exactly one of them.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import pyarrow as pa
from apache_beam import coders
from apache_beam.io import range_trackers
from apache_beam.transforms import display

from .. import Reader
from .._bulk import LIMIT_BYTES, ReaderOptions, record_offsets, records_per_batch
from ._display import read_display_data
from ._pipeline_storage import open_reader, pipeline_storage
from ._source import FileSource, PatternSource, first_at_or_after

__all__ = ["ArrowBatchCoder", "BatchedPatternSource", "RAW", "batched_source", "read_batches_of_range",
           "register_batch_coder"]

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


def register_batch_coder() -> None:
    """Has PCollections typed `pyarrow.RecordBatch` use ArrowBatchCoder:
    portable runners take a PCollection's coder from its element type, and
    would otherwise pickle batches. A coder the pipeline's author registered
    for RecordBatch is left as it is."""
    if pa.RecordBatch not in coders.registry.custom_types:
        coders.registry.register_coder(pa.RecordBatch, ArrowBatchCoder)


def _position(reader: Reader, i: int) -> int:
    """Position of record i (see `_source`)."""
    return record_offsets(reader, 0, i, 0)[0] + LIMIT_BYTES * i


def _grid_start_at_or_after(record: int, size: int, count: int) -> int:
    """The first record >= `record` that starts a batch of a file of
    `count` records cut every `size` records (`count` when none does)."""
    return min(count, -(-record // size) * size)


def _raw_batches(reader: Reader, batch_size: int) -> Iterator[list[bytes]]:
    for start in range(0, len(reader), batch_size):
        yield reader.read_range(start, min(batch_size, len(reader) - start))


def _length(batch: Any) -> int:
    """Records in a batch: a list of bytes or a RecordBatch."""
    return len(batch) if isinstance(batch, list) else batch.num_rows


def read_batches_of_range(
    path: str, options: ReaderOptions, tracker: Any, make_batches: "_BatchMaker"
) -> Iterator[Any]:
    """Yields the batches of `path` that start in the tracker's range, on
    the file's grid (see the module docstring), each claimed at its first
    record's position before it is yielded.

    A claim refused (a dynamic split moved the range's end before the batch)
    ends the read; the batch and those after it are the residual's. A
    decoder that hands one batch over in parts (`decode="row"` decodes a
    large batch in parts side by side) has the batch claimed once, at its
    first part."""
    with open_reader(path, options) as reader:
        count = len(reader)
        size = make_batches.size(reader)
        first = _grid_start_at_or_after(
            first_at_or_after(reader, tracker.start_position()), size, count)
        last = _grid_start_at_or_after(
            first_at_or_after(reader, tracker.stop_position()), size, count)
        if first >= last:
            return
        begin = unclaimed = first  # the next record; the next batch to claim
        with pipeline_storage():  # Arrow decoding reads the schema file as it starts
            batches = make_batches(reader[first:last], size)
        for batch in batches:
            if begin == unclaimed:
                if not tracker.try_claim(_position(reader, begin)):
                    return
                unclaimed += size
            yield batch
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

    def size(self, reader: Reader) -> int:
        """Records per batch of the file `reader` reads: `batch_size`, or
        about _BATCH_BYTES at the whole file's average record size (never a
        range's, so every range of the file cuts the same grid)."""
        return self.batch_size or records_per_batch(
            _BATCH_BYTES, reader.approximate_bytes_per_record(), _MAX_BATCH)

    def __call__(self, view: Reader, size: int) -> Iterator[Any]:
        """The batches of `view`, `size` records each from its first record
        on (the last may be shorter; see `read_batches_of_range` for parts)."""
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
