"""Streaming an object to Google Cloud Storage: a resumable upload whose
chunks leave as they fill; an object of at most one chunk (an empty one
too) is one simple upload. The object appears only when the last chunk
(the one that states the total size) arrives."""

from __future__ import annotations

from typing import Any, Callable

from ._retry import request_timeout
from ._upload import PART_BYTES, PartedUpload
from ._urls import RemotePath

__all__ = ["GcsUpload"]

_CHUNK_UNIT = 256 * 1024  # resumable chunks are multiples of this
_RESUME_INCOMPLETE = 308


class GcsUpload(PartedUpload):
    """An `Upload` to `path` with the google-cloud-storage client
    `client()`. A chunk retried after a failure resumes from the offset the
    server reports, as the resumable protocol prescribes; `abort()` cancels
    the session."""

    def __init__(self, path: RemotePath, client: Callable[[], Any], call: Callable[..., Any],
                 chunk_bytes: int = PART_BYTES) -> None:
        super().__init__(path, client, call, max(_CHUNK_UNIT, chunk_bytes // _CHUNK_UNIT * _CHUNK_UNIT))
        self._session: str | None = None
        self._offset = 0  # bytes the server has

    def _blob(self) -> Any:
        return self._client().bucket(self._path.bucket).blob(self._path.key)

    def _send_part(self, part: bytes) -> None:
        self._send(part, final=False)

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

    def _finish(self, rest: bytes) -> None:
        if self._session is not None:
            self._send(rest, final=True)  # not empty: write() keeps a byte back
            return
        self._call("upload", self._path.url,
                   lambda: self._blob().upload_from_string(
                       rest, content_type="application/octet-stream", retry=None,
                       timeout=request_timeout()))

    def _cancel(self) -> None:
        if self._session is not None:  # DELETE cancels; an unfinished one expires anyway
            self._client()._http.delete(self._session, timeout=request_timeout())


def _http_error(response: Any) -> Exception:
    """The google.api_core exception for an error response, which
    GcsStore._call maps (transient ones are retried)."""
    from google.api_core import exceptions as api_errors

    return api_errors.from_http_response(response)
