"""`SackliSink`: a `fileio.FileSink`, so `fileio.WriteToFiles` (dynamic
destinations, its own file naming) writes bags.

A FileSink is handed an open stream (Beam's `FileSystems.create`), but a
bag ends with its limits, known only when the last record is in. The
engine's writer streams the records into that stream as they are written
(the same upload path a remote `sackli.Writer` takes), keeping only the
limits (8 bytes a record) in a local temporary folder until `flush`
(which `WriteToFiles` calls once, before it closes the stream) appends
them. So the engine stays the only code that lays out a bag (zstd frames
compressed on all cores, the limits, the empty-bag rule), and a file need
not fit on the worker's disk.
"""

from __future__ import annotations

from typing import Any, BinaryIO

from apache_beam import coders
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.transforms import display

from .. import CompressionAutoDetect, CompressionNone, LimitsPlacement
from .._bulk import WriterOptions
from ._compression import with_compression_type
from ._display import describe_compression
from ._shard_file import ShardFile
from ._sink import record_encoder

__all__ = ["SackliSink"]

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

    Not thread-safe: `WriteToFiles` makes one sink per file. Records stream
    into the file as they are written (compressed in batches); only their
    limits wait in a local temporary folder until `flush` appends them;
    `write` after `flush` raises ValueError.
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
        self._shard: ShardFile | None = None

    def create_metadata(self, destination: str, full_file_name: str) -> fileio.FileMetadata:
        # A bag compresses records, never the whole file: Beam must not
        # guess a file compression from the name.
        return fileio.FileMetadata(
            mime_type="application/octet-stream", compression_type=CompressionTypes.UNCOMPRESSED)

    def open(self, fh: BinaryIO) -> None:
        self._shard = ShardFile.into_stream(fh, self._options)

    def write(self, record: Any) -> None:
        if self._shard is None:
            raise ValueError("SackliSink.write before open, or after flush finished the bag")
        self._shard.write(self._encode(record))

    def flush(self) -> None:
        """Finishes the bag: writes the last records and the limits into the
        stream (once)."""
        if self._shard is None:
            return
        shard, self._shard = self._shard, None
        shard.close()

    def display_data(self) -> dict[str, Any]:
        return {
            "record_compression": display.DisplayDataItem(
                describe_compression(self._options.compression, writing=True), label="Record Compression"),
            "coder": display.DisplayDataItem(type(self._coder).__name__, label="Coder"),
        }
