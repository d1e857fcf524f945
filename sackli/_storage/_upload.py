"""What an upload stream is: the records of a remote bag leave as they are
written, and the object appears only when the upload is committed."""

from __future__ import annotations

import io
from typing import Any, Callable, Protocol, TypeVar

from ._urls import RemotePath

__all__ = ["Upload", "UploadFile", "OpenUpload", "PartedUpload", "Attempts"]

T = TypeVar("T")

# Every back-end buffers at most about this many bytes before sending them
# (a multipart part, a resumable chunk): a multiple of 256 KiB (GCS chunks)
# and over S3's 5 MiB minimum part.
PART_BYTES = 8 << 20


class Upload(Protocol):
    """One object being uploaded: `write` its bytes in order, then `commit`
    (the object appears whole) or `abort` (nothing appears, and nothing of
    the upload is left on the server). Not thread-safe.

    Once `commit()` returned, `identity` and `size` describe the object
    published (None before): `identity` is what changes whenever the object
    is replaced, S3's ETag as S3 returns it (in double quotes) or GCS's
    generation (a decimal string); `size` its length in bytes."""

    identity: str | None
    size: int | None

    def write(self, data: bytes) -> None:
        """Appends bytes; sends what fills a part, keeps the rest."""

    def commit(self) -> None:
        """Sends the rest and completes the object. Idempotent; OSError
        once aborted."""

    def abort(self) -> None:
        """Cancels the upload (best effort, never raises). Idempotent."""


class Attempts:
    """A request wrapped for `call` (which may run it several times) that
    notes whether any attempt ended ambiguously: without an answer from the
    server that it refused the request (`answered(error)`: a 4xx response),
    so that the server may have acted on it (a lost or stalled response, a
    timeout, a 5xx)."""

    def __init__(self, request: Callable[[], T], answered: Callable[[BaseException], bool]) -> None:
        self._request = request
        self._answered = answered
        self.count = 0
        self.ambiguous = False

    def __call__(self) -> Any:
        self.count += 1
        try:
            return self._request()
        except BaseException as error:
            if not self._answered(error):
                self.ambiguous = True
            raise


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
    `_call`); `client()` gives the SDK client.

    Publishing (`_publish`, the request that makes the object appear) may
    succeed on the server and still fail here: its response lost, stalled
    past the timeout, or a retry refused because the first attempt already
    completed the upload. So each piece is also given to `_account` (for
    the size and checksums of what was written) and, after a publishing
    request failed with an ambiguous attempt, the object's metadata decides
    (`_stat_written`): holding exactly what was written, the commit
    succeeded; else an OSError naming the URL says what is there."""

    def __init__(self, path: RemotePath, client: Callable[[], Any], call: Callable[..., Any],
                 part_bytes: int) -> None:
        self._path = path
        self._client = client
        self._call = call
        self._part_bytes = part_bytes
        self._buffer = bytearray()
        self._finished = False
        self._aborted = False
        self._written = 0  # bytes given to _account (sent or being sent)
        self.identity: str | None = None
        self.size: int | None = None
        # The user metadata the object is created with (S3 x-amz-meta-*,
        # GCS metadata): set it before the first write.
        self.metadata: dict[str, str] = {}

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
                self._take(part)
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
            self._take(rest)
            identity = self._finish(rest)
        except BaseException:
            self.abort()
            raise
        self._finished = True
        self.identity, self.size = identity, self._written

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

    def _take(self, piece: bytes) -> None:
        self._written += len(piece)
        self._account(piece)

    def _publish(self, what: str, request: Callable[[], T],
                 identity_of: Callable[[T], str | None]) -> str:
        """Runs `request`, the one that makes the object appear, through
        `call`; the identity of the object published (`identity_of` its
        response, else from the object's metadata). When it fails after an
        ambiguous attempt (see `Attempts`), the object's metadata tells
        whether it was published all the same (`_published`)."""
        attempts = Attempts(request, self._answered)
        try:
            response = self._call(what, self._path.url, attempts)
        except Exception as error:
            if not attempts.ambiguous:
                raise
            return self._published(what, error)
        identity = identity_of(response)
        if identity is None:  # not in the response: the object's metadata has it
            identity = self._published(what, None)
        return identity

    def _published(self, what: str, cause: BaseException | None) -> str:
        """The identity of the object at the path if it holds exactly what
        was written (same size and checksum); else an OSError naming the
        URL that says what is true (no object, another object, or that
        checking failed too). `cause`: the publishing request's error."""
        url = self._path.url
        failure = (f"{what} failed ({cause})" if cause is not None
                   else f"{what} answered without the object's identity")
        try:
            found = self._call("check the published object", url, self._stat_written)
        except FileNotFoundError:
            raise OSError(f"{url}: {failure}, and there is no object: nothing was published") from cause
        except Exception as error:
            raise OSError(f"{url}: {failure}, and checking the object failed too ({error}): "
                          "whether it was published is unknown") from cause
        size, identity, same = found
        if not same:
            raise OSError(
                f"{url}: {failure}, and the object there ({size} bytes, {self._identity_name} "
                f"{identity}) is not what was written ({self._written} bytes): it was not "
                "published, or was replaced since"
            ) from cause
        return identity

    # What `identity` is called in messages.
    _identity_name = "identity"

    def _account(self, piece: bytes) -> None:
        """Notes the checksums of the next piece of the object (in order)."""

    def _answered(self, error: BaseException) -> bool:
        """Whether `error` (raised by an SDK request) is the server's answer
        that it refused the request, which it then did not act on."""
        return False

    def _stat_written(self) -> tuple[int, str, bool]:
        """(size, identity, whether it holds exactly the bytes written) of
        the object at the path (one metadata request; FileNotFoundError
        when missing)."""
        raise NotImplementedError

    def _send_part(self, part: bytes) -> None:
        raise NotImplementedError

    def _finish(self, rest: bytes) -> str:
        """Sends `rest` and publishes the object; its identity."""
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
