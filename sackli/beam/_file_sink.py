"""`SackliSink`: a `fileio.FileSink`, so `fileio.WriteToFiles` (dynamic
destinations, its own file naming) writes bags.

A FileSink is handed an open stream (Beam's `FileSystems.create`), but a
bag ends with its limits, known only when the last record is in. The
records go to a `sackli.Writer` on a local temporary file, copied into the
stream on `flush` (which `WriteToFiles` calls once, before it closes the
stream). That keeps the engine the only code that lays out a bag (zstd
frames compressed on all cores, the limits, the empty-bag rule) instead of
a second encoder in Python, at the cost of local disk for one file at a
time; a format-level encoder to a stream would avoid that, and belongs in
the engine.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, BinaryIO

from apache_beam import coders
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.transforms import display

from .._batching import Gatherer
from .._options import CompressionAutoDetect, CompressionNone, LimitsPlacement, WriterOptions
from .._writer import Writer
from ._compression import with_compression_type
from ._display import describe_compression
from ._sink import record_encoder

__all__ = ["SackliSink"]

_BATCH_RECORDS = 1024
_BATCH_BYTES = 8 << 20
_COPY_CHUNK = 16 << 20


def _stream_options(options: WriterOptions | None, compression_type: Any) -> WriterOptions:
    """The writer options of a streamed bag: TAIL limits (one stream holds
    one file), and a definite compression (the sink never learns the
    file's name, so auto-detection means raw records)."""
    if options is None:
        options = WriterOptions()
    elif not isinstance(options, WriterOptions):
        raise TypeError(f"options must be a sackli.Writer.Options, not {type(options).__name__}")
    if options.limits_placement != LimitsPlacement.TAIL:
        raise ValueError(
            "SackliSink writes one stream per file, so its limits go at the file's tail "
            "(LimitsPlacement.TAIL), not in a separate file"
        )
    options = with_compression_type(options, compression_type)
    if isinstance(options.compression, CompressionAutoDetect):
        options = WriterOptions(compression=CompressionNone(), max_parallelism=options.max_parallelism)
    return options


class SackliSink(fileio.FileSink, display.HasDisplayData):
    """Writes the elements of one file of `fileio.WriteToFiles` as a bag.

        fileio.WriteToFiles(
            path="gs://b/out",
            destination=lambda event: event["kind"],
            sink=lambda destination: SackliSink(JsonCoder(), CompressionTypes.ZSTD),
            file_naming=fileio.destination_prefix_naming(".bagz"))

    Args:
      coder: encodes each element to a record (default: `BytesCoder`, the
        elements are the records).
      compression_type: Beam's `CompressionTypes`: ZSTD compresses each
        record (name such files `.bagz`), UNCOMPRESSED and AUTO store them
        raw (the sink is not told the file's name, so AUTO cannot follow
        it). Never the whole file.
      options: a `sackli.Writer.Options` with TAIL placement (the default);
        its compression (e.g. a zstd level or dictionary) must agree with
        `compression_type`.

    Raises:
      ValueError: SEPARATE placement, a compression bags cannot hold, or one
        that contradicts `options`.

    Not thread-safe: `WriteToFiles` makes one sink per file. Records go to a
    local temporary file until `flush` copies the finished bag into the
    stream; `write` after `flush` raises ValueError.
    """

    def __init__(
        self,
        coder: coders.Coder = coders.BytesCoder(),
        compression_type: str = CompressionTypes.AUTO,
        *,
        options: WriterOptions | None = None,
    ) -> None:
        if not isinstance(coder, coders.Coder):
            raise TypeError(f"coder must be an apache_beam Coder, not {type(coder).__name__}")
        self._coder = coder
        self._options = _stream_options(options, compression_type)
        self._encode = record_encoder(coder, "SackliSink")
        self._stream: BinaryIO | None = None
        self._spool_dir: str | None = None
        self._writer: Writer | None = None
        self._gathered: Gatherer | None = None

    def create_metadata(self, destination: str, full_file_name: str) -> fileio.FileMetadata:
        # A bag compresses records, never the whole file: Beam must not
        # guess a file compression from the name.
        return fileio.FileMetadata(
            mime_type="application/octet-stream", compression_type=CompressionTypes.UNCOMPRESSED)

    def open(self, fh: BinaryIO) -> None:
        self._stream = fh
        self._spool_dir = tempfile.mkdtemp(prefix="sackli-sink-")
        self._writer = Writer(os.path.join(self._spool_dir, "file.bag"), self._options)
        self._gathered = Gatherer(self._writer.write_many, _BATCH_RECORDS, _BATCH_BYTES)

    def write(self, record: Any) -> None:
        if self._gathered is None:
            raise ValueError("SackliSink.write before open, or after flush finished the bag")
        self._gathered.add(self._encode(record))

    def flush(self) -> None:
        """Finishes the bag and copies it into the stream (once)."""
        if self._writer is None:
            return
        try:
            self._gathered.flush()
            self._writer.close()
            with open(self._writer.path, "rb") as bag:
                shutil.copyfileobj(bag, self._stream, _COPY_CHUNK)
            self._stream.flush()
        finally:
            self._writer = self._gathered = None
            shutil.rmtree(self._spool_dir, ignore_errors=True)

    def display_data(self) -> dict[str, Any]:
        return {
            "record_compression": display.DisplayDataItem(
                describe_compression(self._options.compression, writing=True), label="Record Compression"),
            "coder": display.DisplayDataItem(type(self._coder).__name__, label="Coder"),
        }
