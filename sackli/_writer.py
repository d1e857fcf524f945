"""`Writer`: writes one bag file."""

from __future__ import annotations

import os
import warnings
from typing import Any, Iterable

from . import _engine
from ._consistency import limits_metadata
from ._format import checksums_path_for, limits_path_for
from ._options import LimitsPlacement, WriterOptions, stores_raw, with_overrides
from ._record_iterables import refuse_single_record
from ._shard_spec import refuse_glob, split_shard_entry, strip_local_prefix
from ._storage import (
    CHECKS_KEY, OpenUpload, StagedFile, UploadDestination, WriteDestination, path_argument,
    write_destination,
)

__all__ = ["Writer"]

Record = Any  # bytes, str (written as UTF-8), bytearray, memoryview, any buffer


def check_placement(spec: str, options: WriterOptions, destination: WriteDestination) -> None:
    """ValueError when `options` ask for a write in place where there is no
    place to write into: a `gs://` or `s3://` object (`destination`, as the
    writer of `spec` decided it)."""
    if not options.atomic and not destination.grows_in_place:
        raise ValueError(
            f"{spec}: atomic=False writes into the file as it grows, which a bucket "
            "cannot do: a gs:// or s3:// object appears only when its upload completes. "
            "Write it with atomic=True (the default)"
        )


def _refuse_shard_spec(spec: str, path: str) -> None:
    """ValueError when `path` (`spec` without its prefix) is a shard spec:
    a Writer writes one file."""
    if split_shard_entry(path) is not None:
        raise ValueError(
            f"{spec!r} is a shard spec: sackli.Writer writes one file; write shard "
            f"sets with sackli.ShardedWriter({spec!r})"
        )


class Writer:
    """Writes records to one bag file, atomically (unless `atomic=False`).

    The bag is written under a temporary name, in a hidden folder beside the
    target (`partial_path`: `.<name>.sackli-partial-<tag>/<name>`), and
    renamed onto the target by `close()`: readers of the target see its old
    content (readers that have it open keep it) or the complete new bag,
    never a half-written one. A `with` block that raises publishes nothing
    and deletes the temporary files.

    While writing, limits go to `limits.<name>` beside the temporary file;
    `flush()` makes everything written so far readable there
    (`Reader(writer.partial_path, limits_placement=SEPARATE)`), and a write
    interrupted by a crash can be completed with `sackli.recover(path)`. On
    `close()`, TAIL placement (the default) appends the limits to the file
    and deletes `limits.<name>`; SEPARATE placement renames `limits.<name>`
    onto the target's first. Thread-safe; use it as a context manager.

    With `atomic=False` (a `Writer.Options` field) the bag is written into
    `path` itself, as bagz writes: its limits go to `limits.<name>` beside
    it, and with SEPARATE placement `flush()` makes the records so far
    readable at `path` (`Reader(path, limits_placement=SEPARATE)`). A crash,
    or a `with` block that raises, leaves the records written so far and
    their limits file there: `sackli.recover(path)` completes the bag. With
    `durable=True` the files are fsynced before they are published and
    their folder after, so a `close()` that returned survives power loss
    (docs/usage.md compares the modes).

    A `path` that is a symbolic link is written through: the link stays and
    the file it points to is replaced (its temporary files beside that file).

    Compressed records are copied into batches that the engine's thread pool
    compresses while the caller goes on (up to `max_parallelism` threads;
    the batches in flight hold at most 256 MiB, whatever `max_parallelism`
    is); batches reach the file in call order. A record of 16 MiB or more is
    not copied: the calling thread compresses it from the caller's buffer
    (the GIL released), holding only its compressed frame. An error
    writing a batch (a full disk, say) raises from a later `write`,
    `write_many`, `flush` or `close`, and from every call after it: no
    record is ever written after a lost one.

    Args:
      path: the file to create (replaced by `close()` if it exists). Its
        folder must exist. A `gs://bucket/key` or `s3://bucket/key` object is
        uploaded as it is written (S3 multipart parts, GCS resumable chunks
        of 8 MiB; an object smaller than that is one plain upload at
        `close()`), so local disk holds only its limits (8 bytes a record).
        The object appears only when `close()` completes the upload; a
        failed or discarded write leaves no object and no unfinished
        upload. Write shard sets (`name@N.ext`, `name@*.ext`) with
        `sackli.ShardedWriter`.
      options: a `Writer.Options`; keyword arguments override its fields.

    Raises:
      FileNotFoundError: the folder does not exist.
      IsADirectoryError: `path` is a directory.
      ValueError: `atomic=False` for a `gs://` or `s3://` path.

    Example:
      >>> with sackli.Writer("out.bagz") as writer:
      ...     writer.write(b"first")
      ...     writer.write_many([b"second", "third"])
    """

    Options = WriterOptions

    def __init__(
        self,
        path: str | os.PathLike[str],
        options: WriterOptions | None = None,
        **option_overrides: Any,
    ) -> None:
        spec = path_argument(path, "path")
        self._options = with_overrides(WriterOptions, options, option_overrides)
        self._path = strip_local_prefix(spec)
        _refuse_shard_spec(spec, self._path)
        refuse_glob(spec, self._path)
        destination = write_destination(self._path)  # decided once, where the path enters
        check_placement(self._path, self._options, destination)
        self._open(destination.stage_file())

    @classmethod
    def _at(cls, path: str, options: WriterOptions, destination: WriteDestination) -> "Writer":
        """A Writer of one shard of a set, as `sackli.ShardedWriter` hands it
        over: `path` is ready (the set parsed and checked its spec once: no
        prefix, no glob), `options` are resolved and `destination` (at
        `path`) is the set's, decided where its spec entered, so nothing is
        parsed or checked again per shard, but that the shard's name is no
        spec itself (`x@2@3.bag` names its shards `x-00000-of-00002@3.bag`,
        which no reader could open by name)."""
        _refuse_shard_spec(path, path)
        writer = cls.__new__(cls)
        writer._options = options
        writer._path = path
        writer._open(destination.stage_file())
        return writer

    def _open(self, staged: StagedFile, tag_limits: bool = True) -> None:
        # Locally the engine writes the file under a temporary name and
        # renames it; for an object the records stream into an upload and
        # only the limits stay local (see StagedFile).
        self._staged = staged
        # Whether a SEPARATE limits object names the version of its records
        # (only for sackli's own objects: not for Beam's temporary objects,
        # which Beam renames by copying).
        self._tag_limits = tag_limits
        metadata = getattr(staged.stream, "metadata", None)  # sackli's own uploads
        if isinstance(metadata, dict) and self._raw():
            # Readers of the object then know without asking whether a
            # sidecar lies beside it, and ignore one an older object of this
            # name left (docs/format.md, section 12).
            metadata[CHECKS_KEY] = "crc32c" if self._options.record_checksums else "none"
        try:
            self._core = _engine.WriterCore(staged.local_path, self._options._engine_options,
                                            stream=staged.stream, url=staged.url)
        except BaseException:
            staged.discard()
            raise

    @classmethod
    def _uploading(cls, url: str, options: WriterOptions, opener: OpenUpload) -> "Writer":
        """A Writer of the remote `url` whose uploads `opener` opens (the
        Beam sink's, configured by the pipeline options)."""
        destination = UploadDestination(url)
        check_placement(url, options, destination)
        writer = cls.__new__(cls)
        writer._options = options
        writer._path = url
        writer._open(destination.stage_file(opener), tag_limits=False)
        return writer

    @property
    def path(self) -> str:
        """The file being written."""
        return self._path

    @property
    def partial_path(self) -> str:
        """Where the records are written until `close()` renames them onto
        `path` (`path` itself with `atomic=False`). For a remote target no
        records are there (they stream into the upload); its limits are kept
        beside it."""
        return self._core.partial_path

    @property
    def options(self) -> WriterOptions:
        """The options the writer was opened with."""
        return self._options

    @property
    def records_written(self) -> int:
        """Records written so far (compressed ones may still be in flight)."""
        return self._core.records_written

    @property
    def bytes_written(self) -> int:
        """Bytes of stored (possibly compressed) records written so far;
        waits for the batches in flight."""
        return self._core.bytes_written

    @property
    def closed(self) -> bool:
        """Whether the writer is closed."""
        return self._core.closed

    def write(self, record: Record) -> None:
        """Appends one record: bytes, str (UTF-8) or any bytes-like object.

        Raises ValueError after `close()`.
        """
        self._core.write(record)

    def write_many(self, records: Iterable[Record]) -> None:
        """Appends records in order (one call for many records: cheaper
        than a `write` loop). A single str or bytes-like object raises
        TypeError: it is one record, not an iterable of them."""
        refuse_single_record(records)
        self._core.write_many(records)

    def flush(self) -> None:
        """Waits for the batches in flight, then hands everything written so
        far to the operating system.

        Afterwards a Reader of `partial_path` with
        `limits_placement=SEPARATE` sees every record written so far (`path`
        itself changes only at `close()`, unless `atomic=False`: then
        `partial_path` is `path`). It does not fsync, even when `durable`.
        For a `gs://`
        or `s3://` path it hands the records to the upload, which sends the
        parts that are full; nothing becomes visible to readers before
        `close()`.
        """
        self._core.flush()

    def close(self) -> None:
        """Finishes the file (appending the limits for TAIL) and renames it
        onto `path`. Idempotent. With `durable=True` the files are fsynced
        before the rename and the folder after it.

        For a `gs://` or `s3://` path it then completes the upload (with
        SEPARATE placement, after uploading its `limits.` object); the object
        appears whole or not at all: if closing fails, the upload is aborted.
        """
        if self._core.closed:
            return
        try:
            self._core.close()
            # The engine renamed a SEPARATE limits file onto `limits.<name>`
            # beside what it wrote; an object's goes up after the records.
            beside = []
            if self._options.limits_placement == LimitsPlacement.SEPARATE:
                beside.append((limits_path_for(self._staged.local_path),
                               limits_path_for(self._path)))
            if self._core.record_checksums:  # an object's sidecar, renamed locally
                beside.append((checksums_path_for(self._staged.local_path),
                               checksums_path_for(self._path)))
            self._staged.publish(beside, self._limits_metadata if self._tag_limits else None)
        except BaseException:
            self._staged.discard()
            raise

    def _raw(self) -> bool:
        """Whether the records are stored raw (those a sidecar checks)."""
        return stores_raw(self._options.compression, self._path)

    def _limits_metadata(self, version: str) -> dict[str, str]:
        # A limits object names the version of its records (_consistency).
        return limits_metadata(self._path, version)

    def _discard(self) -> None:
        """Stops writing and deletes the temporary files; `path` is left as
        it was. In place (`atomic=False`), what was written stays at `path`
        with its limits file, for `sackli.recover`."""
        self._core.discard()
        self._staged.discard()

    def _abandon(self) -> None:
        """Stops writing without publishing: a local write keeps what it
        wrote for `sackli.recover` (what a crash after a flush leaves); a
        remote one is discarded (a bucket keeps no unfinished upload)."""
        self._staged.abandon(self._core, self._discard)

    def __del__(self) -> None:
        core = getattr(self, "_core", None)
        if core is None or core.closed:
            return
        # Closing here would publish a write cut short (an exception outside
        # `with`) as if it were complete.
        kept = "" if not self._staged.keeps_unfinished else (
            f"; the records written so far are kept in {os.path.dirname(core.partial_path)}: "
            f"`sackli recover {self._path}` completes them")
        warnings.warn(f"sackli.Writer({self._path!r}) was not closed: nothing was "
                      f"published{kept}", ResourceWarning, source=self)
        try:
            self._abandon()
        except Exception:  # nothing can report from here; the files stay
            pass

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, exc_type: Any, *exc_info: object) -> None:
        if exc_type is not None:
            # A failed write publishes nothing rather than a partial bag.
            self._discard()
            return
        try:
            self.close()
        except BaseException:
            self._discard()  # a close that failed (a full disk) leaves nothing behind either
            raise

    def __reduce__(self) -> Any:
        raise TypeError("a sackli.Writer cannot be pickled; open one per process")

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.records_written} records"
        return f"<sackli.Writer({self._path!r}): {state}>"
