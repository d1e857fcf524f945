"""Opening record files for streaming, with transparent gzip for `*.gz`.

gzip goes through `zlib_ng` (PyPI `zlib-ng`) when it is installed: the same
format and levels as zlib, compressed and decompressed faster. Without it the
standard library's zlib does the work. Compression runs in a background
thread on blocks of about 1 MiB, so it overlaps with reading and encoding the
records (zlib and zlib-ng release the GIL while they compress).
"""

from __future__ import annotations

import gzip
import os
import queue
import threading
import zlib
from typing import Any, BinaryIO, Iterable

from .._bulk import refuse_single_record
from .._storage import path_argument

__all__ = ["DEFAULT_GZIP_LEVEL", "RecordFileWriter", "display_name", "gzip_library", "open_binary"]

# Large buffers: records are read and written in many small pieces.
_BUFFER_BYTES = 1 << 20
# What `gzip -6` and zlib use by default: level 9 compresses a few percent
# smaller and takes 2-3 times as long.
DEFAULT_GZIP_LEVEL = 6
# Blocks waiting for the compressing thread (bounds memory to a few MiB).
_QUEUED_BLOCKS = 4


def _zlib_module() -> Any:
    """zlib_ng's zlib when installed, else the standard library's."""
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        return zlib
    return zlib_ng


def gzip_library() -> str:
    """Which library compresses and decompresses gzip: "zlib-ng" or "zlib"."""
    return "zlib" if _zlib_module() is zlib else "zlib-ng"


def _open_gzip_reader(path: str | os.PathLike[str]) -> BinaryIO:
    try:
        from zlib_ng import gzip_ng
    except ImportError:
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return gzip_ng.open(path, "rb")  # type: ignore[no-any-return]


class _GzipWriter:
    """A write-only binary stream of gzip data (one gzip member, no file name,
    mtime 0, so equal input gives equal bytes), compressed in a background
    thread. `close()` finishes the stream and raises what the thread hit."""

    def __init__(self, path: str | os.PathLike[str], level: int) -> None:
        module = _zlib_module()
        # wbits 31: a gzip header and trailer around the deflate stream.
        self._compressor = module.compressobj(level, module.DEFLATED, 31)
        self._file: BinaryIO | None = open(path, "wb")  # noqa: SIM115
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._blocks: queue.Queue[bytes | None] = queue.Queue(_QUEUED_BLOCKS)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._compress, name="sackli-gzip", daemon=True)
        self._thread.start()

    def _compress(self) -> None:
        while True:
            block = self._blocks.get()
            if block is None:
                return
            if self._error is not None:
                continue  # drain, so that the writing side never blocks
            try:
                assert self._file is not None
                self._file.write(self._compressor.compress(block))
            except BaseException as error:  # noqa: BLE001 - raised again by close()
                self._error = error

    def _send(self) -> None:
        if self._pending:
            self._blocks.put(b"".join(self._pending))
            self._pending, self._pending_bytes = [], 0
        if self._error is not None:
            raise self._error

    def write(self, data: bytes) -> int:
        if self._file is None:
            raise ValueError("write to a closed gzip stream")
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= _BUFFER_BYTES:
            self._send()
        return len(data)

    def close(self) -> None:
        if self._file is None:
            return
        try:
            try:
                self._send()
            finally:
                self._blocks.put(None)
                self._thread.join()
            if self._error is not None:
                raise self._error
            self._file.write(self._compressor.flush())
        finally:
            self._file.close()
            self._file = None

    def __enter__(self) -> "_GzipWriter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def display_name(source: str | os.PathLike[str] | BinaryIO) -> str:
    """What messages call a file given by its path or as an open stream
    (the stream's `name`, e.g. "-" for standard input)."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return str(getattr(source, "name", "<stream>"))


def open_binary(
    path: str | os.PathLike[str] | BinaryIO, mode: str, gzip_level: int = DEFAULT_GZIP_LEVEL
) -> BinaryIO:
    """`path` opened for binary reading ("rb") or writing ("wb"), through gzip
    (at `gzip_level`, 0-9, when writing) when its name ends in `.gz`.

    `path` may be an open binary stream instead (standard input or output,
    `sackli convert -`): read through gzip when its `name` ends in `.gz`,
    else used as it is."""
    if not isinstance(path, (str, os.PathLike)):
        return _open_gzip_reader(path) if mode == "rb" and display_name(path).endswith(".gz") else path
    path = path_argument(path, "path")  # a bytes path object is refused here
    if path.endswith(".gz"):
        if mode == "rb":
            return _open_gzip_reader(path)
        if not 0 <= gzip_level <= 9:
            raise ValueError(f"gzip level must be 0-9, not {gzip_level}")
        return _GzipWriter(path, gzip_level)  # type: ignore[return-value]
    return open(path, mode, buffering=_BUFFER_BYTES)  # noqa: SIM115


class RecordFileWriter:
    """Base of the writers here: owns the output file, counts records, and is
    a context manager. Subclasses implement `_encode(record) -> bytes`.

    `gzip_level` (0-9) applies to files named `*.gz`. `name` is what error
    messages call the file (default: `path`), for a file written under a
    temporary name.
    """

    def __init__(self, path: str | os.PathLike[str] | BinaryIO,
                 gzip_level: int = DEFAULT_GZIP_LEVEL, name: str | None = None) -> None:
        self._path = display_name(path)  # or an open stream (standard output)
        self.name = self._path if name is None else name
        self._file: BinaryIO | None = open_binary(path, "wb", gzip_level)
        self.records_written = 0
        self.bytes_written = 0

    @property
    def path(self) -> str:
        """The file being written."""
        return self._path

    def _encode(self, record: bytes) -> bytes:
        raise NotImplementedError

    def _checked_file(self) -> BinaryIO:
        if self._file is None:
            raise ValueError(f"{self.name}: write to a closed writer")
        return self._file

    def write(self, record: bytes | bytearray | memoryview) -> None:
        """Appends one record."""
        self.write_many([record])

    def write_many(self, records: Iterable[bytes | bytearray | memoryview]) -> None:
        """Appends records in order (encoded into blocks of about 1 MiB, one
        write each). A record that cannot be encoded raises after the ones
        before it were written. A single str or bytes-like object raises
        TypeError: it is one record, not an iterable of them."""
        file = self._checked_file()
        refuse_single_record(records)
        encoded: list[bytes] = []
        size = 0
        try:
            for record in records:
                data = self._encode(bytes(record))  # may read records_written
                encoded.append(data)
                size += len(data)
                self.records_written += 1
                if size >= _BUFFER_BYTES:
                    file.write(b"".join(encoded))
                    self.bytes_written += size
                    encoded, size = [], 0
        finally:
            if encoded:
                file.write(b"".join(encoded))
                self.bytes_written += size

    def close(self) -> None:
        """Flushes and closes the file. Idempotent."""
        if self._file is not None:
            file, self._file = self._file, None
            file.close()

    def __enter__(self) -> "RecordFileWriter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
