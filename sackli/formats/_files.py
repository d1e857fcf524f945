"""Opening record files for streaming, with transparent gzip for `*.gz`."""

from __future__ import annotations

import gzip
import os
from typing import BinaryIO, Iterable

# Large buffers: records are read and written in many small pieces.
_BUFFER_BYTES = 1 << 20


def open_binary(path: str | os.PathLike[str], mode: str) -> BinaryIO:
    """`path` opened for binary reading ("rb") or writing ("wb"), through gzip
    when its name ends in `.gz`."""
    if os.fspath(path).endswith(".gz"):
        return gzip.open(path, mode)  # type: ignore[return-value]
    return open(path, mode, buffering=_BUFFER_BYTES)  # noqa: SIM115


class RecordFileWriter:
    """Base of the writers here: owns the output file, counts records, and is
    a context manager. Subclasses implement `_encode(record) -> bytes`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        self._file: BinaryIO | None = open_binary(self._path, "wb")
        self.records_written = 0
        self.bytes_written = 0

    @property
    def path(self) -> str:
        """The file being written."""
        return self._path

    def _encode(self, record: bytes) -> bytes:
        raise NotImplementedError

    def write(self, record: bytes | bytearray | memoryview) -> None:
        """Appends one record."""
        if self._file is None:
            raise ValueError(f"{self._path}: write to a closed writer")
        encoded = self._encode(bytes(record))
        self._file.write(encoded)
        self.records_written += 1
        self.bytes_written += len(encoded)

    def write_many(self, records: Iterable[bytes]) -> None:
        """Appends records in order."""
        for record in records:
            self.write(record)

    def close(self) -> None:
        """Flushes and closes the file. Idempotent."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "RecordFileWriter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
