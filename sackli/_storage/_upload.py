"""What an upload stream is: the records of a remote bag leave as they are
written, and the object appears only when the upload is committed."""

from __future__ import annotations

from typing import Callable, Protocol

__all__ = ["Upload", "OpenUpload", "UploadState"]

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
        """Sends the rest and completes the object. Idempotent."""

    def abort(self) -> None:
        """Cancels the upload (best effort, never raises). Idempotent."""


OpenUpload = Callable[[str], Upload]


class UploadState:
    """The life cycle every upload shares: open, then committed or aborted
    for good; writing after either is an error (a writer dropped after
    `abort` must not start a new upload)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.finished = False

    def check_open(self) -> None:
        if self.finished:
            raise ValueError(f"{self.url}: write to a finished upload")
