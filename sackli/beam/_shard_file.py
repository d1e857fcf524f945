"""One shard of `WriteToSackli`, written at Beam's temporary name.

On a local file system the shard is written in place. Elsewhere it streams
as it is written, so a shard need not fit on the worker's disk (only its
limits, 8 bytes a record, wait locally):

* `s3://` and `gs://`: through sackli's own upload streams (multipart parts,
  resumable chunks; an empty or small object is one plain upload, which
  Beam's S3 file system cannot do: it fails on an empty object), with the
  storage settings of the pipeline's options (`--s3_endpoint_url`,
  credentials, project; see `_pipeline_storage`), so a pipeline writes with
  the configuration its user gave Beam, the environment filling in only
  what the options leave out.
* any other Beam file system: through `FileSystems.create`.

SEPARATE placement uploads `limits.<name>` beside the shard, first.
"""

from __future__ import annotations

from typing import Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.localfilesystem import LocalFileSystem

from .. import Writer
from .._bulk import Gatherer, WriterOptions
from .._storage import Upload, by_upload, open_upload
from ._pipeline_storage import pipeline_storage

__all__ = ["ShardFile", "StreamUpload"]

_MIME_TYPE = "application/octet-stream"
# Records are handed to the engine in batches, so .bagz shards compress on
# all cores: at most this many records or bytes at a time.
_BATCH_RECORDS = 1024
_BATCH_BYTES = 8 << 20
# The name the writer of a shard written into a stream is given: only its
# suffix could matter (the options' compression is definite there), and no
# file by that name is ever written.
_STREAM_NAME = "beam-stream://file.bag"


def _is_local(path: str) -> bool:
    return isinstance(FileSystems.get_filesystem(path), LocalFileSystem)


class StreamUpload:
    """An `Upload` into an open Beam stream: bytes go straight through;
    `commit` closes the stream (or, with `close=False`, only flushes it, for
    a stream its opener closes). Beam offers no way to cancel a create:
    `abort` leaves the half-written temporary file to Beam's clean-up of
    its temporary folder."""

    def __init__(self, stream: Any, close: bool = True) -> None:
        self._stream: Any = stream
        self._close = close

    def write(self, data: bytes) -> None:
        if self._stream is None:
            raise ValueError("write to a finished or aborted Beam stream")
        self._stream.write(data)

    def commit(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            if self._close:
                stream.close()
            else:
                stream.flush()

    def abort(self) -> None:
        self._stream = None


def _sackli_upload(url: str) -> Upload:
    """The upload of one object of a shard on gs:// or s3://: sackli's own
    (its client from the pipeline's storage settings, kept for the upload's
    life)."""
    with pipeline_storage():
        return open_upload(url)


def _beam_upload(url: str) -> Upload:
    """The upload of one object of a shard on a file system sackli has no
    stream of its own for: a Beam stream."""
    return StreamUpload(FileSystems.create(url, _MIME_TYPE, CompressionTypes.UNCOMPRESSED))


class ShardFile:
    """Writes one shard at `path` (Beam's temporary name), in batches;
    `ShardFile.into_stream` writes one into an open Beam stream instead."""

    def __init__(self, path: str, options: WriterOptions) -> None:
        if _is_local(path):
            self._start(Writer(path, options))
        else:
            # Decided once, where the path enters: every object of the shard
            # (its records, a SEPARATE limits object) is in the same store.
            opener = _sackli_upload if by_upload(path) else _beam_upload
            self._start(Writer._uploading(path, options, opener))

    @classmethod
    def into_stream(cls, stream: Any, options: WriterOptions) -> "ShardFile":
        """A shard written into `stream` (flushed, not closed, at `close`):
        the records go through as they are written, the limits at the end."""
        shard = cls.__new__(cls)
        shard._start(Writer._uploading(_STREAM_NAME, options,
                                       lambda url: StreamUpload(stream, close=False)))
        return shard

    def _start(self, writer: Writer) -> None:
        self._writer = writer
        self._gathered = Gatherer(writer.write_many, _BATCH_RECORDS, _BATCH_BYTES)

    def write(self, record: bytes) -> None:
        self._gathered.add(record)

    def close(self) -> None:
        try:
            self._gathered.flush()
        except BaseException:
            self._writer._discard()  # nothing of a failed shard is uploaded (a stream's
            # half-written file is left to Beam's clean-up)
            raise
        self._writer.close()
