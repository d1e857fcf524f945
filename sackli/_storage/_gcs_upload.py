"""Streaming an object to Google Cloud Storage: a resumable upload whose
chunks leave as they fill; an object of at most one chunk (an empty one
too) is one simple upload. The object appears only when the last chunk
(the one that states the total size) arrives."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ._retry import request_timeout
from ._upload import PART_BYTES, UploadState
from ._urls import RemotePath

__all__ = ["GcsUpload"]

T = TypeVar("T")
Call = Callable[[str, str, Callable[[], T]], T]
_CHUNK_UNIT = 256 * 1024  # resumable chunks are multiples of this
_RESUME_INCOMPLETE = 308


class GcsUpload:
    """An `Upload` to `path` with the google-cloud-storage client
    `client()`; `call(what, url, request)` maps errors and retries
    (GcsStore._call). A chunk retried after a failure resumes from the
    offset the server reports, as the resumable protocol prescribes."""

    def __init__(self, path: RemotePath, client: Callable[[], Any], call: Call,
                 chunk_bytes: int = PART_BYTES) -> None:
        self._path = path
        self._client = client
        self._call = call
        self._chunk_bytes = max(_CHUNK_UNIT, chunk_bytes // _CHUNK_UNIT * _CHUNK_UNIT)
        self._buffer = bytearray()
        self._session: str | None = None
        self._offset = 0  # bytes the server has
        self._state = UploadState(path.url)

    def _blob(self) -> Any:
        return self._client().bucket(self._path.bucket).blob(self._path.key)

    def write(self, data: bytes) -> None:
        """Appends bytes; uploads each chunk as it fills (keeping at least
        one byte back, so that the last request always carries data)."""
        self._state.check_open()
        self._buffer += data
        while len(self._buffer) > self._chunk_bytes:
            chunk = bytes(self._buffer[:self._chunk_bytes])
            del self._buffer[:self._chunk_bytes]
            self._send(chunk, final=False)

    def _send(self, chunk: bytes, final: bool) -> None:
        if self._session is None:
            self._session = self._call(
                "start resumable upload", self._path.url,
                lambda: self._blob().create_resumable_upload_session(
                    content_type="application/octet-stream", retry=None,
                    timeout=request_timeout()))
        start, end = self._offset, self._offset + len(chunk)
        total = str(end) if final else "*"
        attempts = 0

        def put() -> None:
            nonlocal attempts
            attempts += 1
            # After a failure the server may hold part of the chunk already.
            sent = start if attempts == 1 else self._committed()
            body = chunk[sent - start:]
            span = f"bytes {sent}-{end - 1}/{total}" if body else f"bytes */{total}"
            response = self._client()._http.put(
                self._session, data=body, headers={"Content-Range": span},
                timeout=request_timeout())
            if response.status_code not in (200, 201, _RESUME_INCOMPLETE):
                raise _http_error(response)

        self._call(f"upload bytes {start}-{end - 1}", self._path.url, put)
        self._offset = end

    def _committed(self) -> int:
        """How many bytes the server has (a status query of the session)."""
        response = self._client()._http.put(
            self._session, data=b"", headers={"Content-Range": "bytes */*"},
            timeout=request_timeout())
        if response.status_code in (200, 201):  # complete already
            return int(response.json().get("size", 0))
        if response.status_code != _RESUME_INCOMPLETE:
            raise _http_error(response)
        received = response.headers.get("Range")  # "bytes=0-N"
        return int(received.rpartition("-")[2]) + 1 if received else 0

    def commit(self) -> None:
        """Uploads the rest and completes the object."""
        if self._state.finished:
            return
        try:
            rest, self._buffer = bytes(self._buffer), bytearray()
            if self._session is None:
                self._call("upload", self._path.url,
                           lambda: self._blob().upload_from_string(
                               rest, content_type="application/octet-stream", retry=None,
                               timeout=request_timeout()))
            else:
                self._send(rest, final=True)
        except BaseException:
            self.abort()
            raise
        self._state.finished = True

    def abort(self) -> None:
        """Cancels the resumable session, if one was started."""
        if self._state.finished:
            return
        self._state.finished = True
        self._buffer = bytearray()
        if self._session is None:
            return
        try:  # DELETE cancels a session; an unfinished one expires anyway
            self._client()._http.delete(self._session, timeout=request_timeout())
        except Exception:  # noqa: BLE001 - best effort
            pass


def _http_error(response: Any) -> Exception:
    """The google.api_core exception for an error response, which
    GcsStore._call maps (transient ones are retried)."""
    from google.api_core import exceptions as api_errors

    return api_errors.from_http_response(response)
