"""One shard of `WriteToSackli`, written at Beam's temporary name.

On a local file system the shard is written in place; elsewhere (`gs://`,
`s3://`) it is spooled to a local temporary file and uploaded through Beam's
file system when the shard closes. SEPARATE placement writes
`limits.<name>` beside the shard, uploaded first.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.localfilesystem import LocalFileSystem

from .._batching import Gatherer
from .._format import limits_path_for
from .._options import LimitsPlacement, WriterOptions
from .._writer import Writer

__all__ = ["ShardFile"]

_MIME_TYPE = "application/octet-stream"
# Records are handed to the engine in batches, so .bagz shards compress on
# all cores: at most this many records or bytes at a time.
_BATCH_RECORDS = 1024
_BATCH_BYTES = 8 << 20
_UPLOAD_CHUNK = 16 << 20


def _is_local(path: str) -> bool:
    return isinstance(FileSystems.get_filesystem(path), LocalFileSystem)


def _upload(local_path: str, remote_path: str) -> None:
    with open(local_path, "rb") as source, FileSystems.create(
        remote_path, _MIME_TYPE, CompressionTypes.UNCOMPRESSED
    ) as target:
        shutil.copyfileobj(source, target, _UPLOAD_CHUNK)


class ShardFile:
    """Writes one shard at `path` (Beam's temporary name), in batches."""

    def __init__(self, path: str, options: WriterOptions) -> None:
        self._path = path
        self._spool_dir = None if _is_local(path) else tempfile.mkdtemp(prefix="sackli-beam-")
        local = path if self._spool_dir is None else os.path.join(self._spool_dir, "shard")
        self._writer = Writer(local, options)
        self._gathered = Gatherer(self._writer.write_many, _BATCH_RECORDS, _BATCH_BYTES)

    def write(self, record: bytes) -> None:
        self._gathered.add(record)

    def close(self) -> None:
        try:
            self._gathered.flush()
            self._writer.close()
            if self._spool_dir is not None:
                separate = self._writer.options.limits_placement == LimitsPlacement.SEPARATE
                if separate:  # the limits first: a shard never lacks them
                    _upload(limits_path_for(self._writer.path), limits_path_for(self._path))
                _upload(self._writer.path, self._path)
        finally:
            if self._spool_dir is not None:
                shutil.rmtree(self._spool_dir, ignore_errors=True)
