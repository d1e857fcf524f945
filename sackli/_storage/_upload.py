"""What an upload stream is: the records of a remote bag leave as they are
written, and the object appears only when the upload is committed."""

from __future__ import annotations

import io
from typing import Any, Callable, Protocol

from ._urls import RemotePath

__all__ = ["Upload", "UploadFile", "OpenUpload", "PartedUpload"]

# Every back-end buffers at most about this many bytes before sending them
# (a multipart part, a resumable chunk): a multiple of 256 KiB (GCS chunks)
# and over S3's 5 MiB minimum part.
PART_BYTES = 8 << 20


class Upload(Protocol):
    """One object being uploaded: `write` its bytes in order, then `commit`
    (the object appears whole) or `abort` (nothing appears, and nothing of
    the upload is left on the server). Not thread-safe."""

    def write(self, data: bytes) -> None:
        """Appends bytes; sends what fills a part, keeps the rest."""

    def commit(self) -> None:
        """Sends the rest and completes the object. Idempotent; OSError
        once aborted."""

    def abort(self) -> None:
        """Cancels the upload (best effort, never raises). Idempotent."""


OpenUpload = Callable[[str], Upload]


class PartedUpload:
    """The life cycle both back-ends share: bytes gather in a buffer and
    leave a part at a time (`_send_part`, always keeping at least one byte
    back, so the last request carries data); `commit` hands the rest to
    `_finish`, `abort` calls `_cancel`. A part that cannot be sent aborts
    the upload. Once committed or aborted, writing is an error (a writer
    dropped after `abort` must not start a new upload), and so is
    committing an aborted upload: it never completes with a part missing.
    `call(what, url, request)` maps errors and retries (the store's
    `_call`); `client()` gives the SDK client."""

    def __init__(self, path: RemotePath, client: Callable[[], Any], call: Callable[..., Any],
                 part_bytes: int) -> None:
        self._path = path
        self._client = client
        self._call = call
        self._part_bytes = part_bytes
        self._buffer = bytearray()
        self._finished = False
        self._aborted = False

    def _check_not_aborted(self) -> None:
        if self._aborted:
            raise OSError(f"{self._path.url}: the upload was aborted (after an error, or discarded)")

    def write(self, data: bytes) -> None:
        """Appends bytes; sends each part as it fills."""
        self._check_not_aborted()
        if self._finished:
            raise ValueError(f"{self._path.url}: write to a finished upload")
        self._buffer += data
        while len(self._buffer) > self._part_bytes:
            part = bytes(self._buffer[:self._part_bytes])
            del self._buffer[:self._part_bytes]
            try:
                self._send_part(part)
            except BaseException:
                self.abort()
                raise

    def commit(self) -> None:
        """Sends the rest and completes the object; aborts if that fails.
        Idempotent; raises OSError once aborted."""
        self._check_not_aborted()
        if self._finished:
            return
        try:
            rest, self._buffer = bytes(self._buffer), bytearray()
            self._finish(rest)
        except BaseException:
            self.abort()
            raise
        self._finished = True

    def abort(self) -> None:
        """Cancels the upload (best effort, never raises). Idempotent."""
        if self._finished:
            return
        self._finished = self._aborted = True
        self._buffer = bytearray()
        try:
            self._cancel()
        except Exception:  # noqa: BLE001 - the server expires what is left
            pass

    def _send_part(self, part: bytes) -> None:
        raise NotImplementedError

    def _finish(self, rest: bytes) -> None:
        raise NotImplementedError

    def _cancel(self) -> None:
        raise NotImplementedError


class UploadFile(io.RawIOBase):
    """A write-only binary file over an `Upload`, for libraries that write
    to file objects (pyarrow's ParquetWriter). Closing it does not commit:
    the caller commits (or aborts) the upload."""

    def __init__(self, upload: Upload, name: str) -> None:
        super().__init__()
        self._upload = upload
        self._position = 0
        self.name = name

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._upload.write(chunk)
        self._position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self._position
