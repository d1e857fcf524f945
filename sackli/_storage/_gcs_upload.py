"""Streaming an object to Google Cloud Storage: a resumable upload whose
chunks leave as they fill; an object of at most one chunk (an empty one
too) is one simple upload. The object appears only when the last chunk
(the one that states the total size) arrives.

What was written is known by its size, CRC32C and MD5 (as GCS gives them
in an object's metadata, `crc32c` and `md5Hash`): a publishing request
(the simple upload, the last chunk) that failed ambiguously is judged by
the object's metadata against them (see `PartedUpload`).
"""

from __future__ import annotations

import base64
import errno
import hashlib
from typing import Any, Callable

from ._retry import Transient, request_timeout
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

    _identity_name = "generation"

    def __init__(self, path: RemotePath, client: Callable[[], Any], call: Callable[..., Any],
                 chunk_bytes: int = PART_BYTES) -> None:
        super().__init__(path, client, call, max(_CHUNK_UNIT, chunk_bytes // _CHUNK_UNIT * _CHUNK_UNIT))
        self._session: str | None = None
        self._offset = 0  # bytes the server has
        self._md5 = hashlib.md5(usedforsecurity=False)
        self._crc32c = _crc32c()

    def _account(self, piece: bytes) -> None:
        self._md5.update(piece)
        if self._crc32c is not None:
            self._crc32c.update(piece)

    def _answered(self, error: BaseException) -> bool:
        from google.api_core import exceptions as api_errors

        code = getattr(error, "code", None) if isinstance(error, api_errors.GoogleAPICallError) else None
        if self._session is not None and code in (404, 410):
            return False  # a session the first attempt completed answers so
        return isinstance(code, int) and 400 <= code < 500 and code != 408

    def _blob(self) -> Any:
        return self._client().bucket(self._path.bucket).blob(self._path.key)

    def _start_session(self) -> str:
        blob = self._blob()
        if self.metadata:
            blob.metadata = dict(self.metadata)
        return blob.create_resumable_upload_session(
            content_type="application/octet-stream", retry=None, timeout=request_timeout())

    def _send_part(self, part: bytes) -> None:
        self._call(f"upload bytes {self._offset}-{self._offset + len(part) - 1}", self._path.url,
                   self._chunk_request(part, final=False))
        self._offset += len(part)

    def _chunk_request(self, chunk: bytes, final: bool) -> Callable[[], dict | None]:
        """The request (for `call`) that sends `chunk` at the current offset;
        it answers the object's metadata once the upload is complete."""
        if self._session is None:
            self._session = self._call(
                "start resumable upload", self._path.url, self._start_session)
        start, end = self._offset, self._offset + len(chunk)
        total = str(end) if final else "*"
        attempts = 0

        def put() -> dict | None:
            nonlocal attempts
            attempts += 1
            sent = start
            if attempts > 1:
                # After a failure the server may hold part of the chunk already,
                # or (the last chunk's response lost) the whole object.
                sent, complete = self._status()
                if complete is not None:
                    if not final or sent != end:
                        raise OSError(f"{self._path.url}: the server completed the upload with "
                                      f"{sent} bytes, not the {end} written")
                    return complete
            body = chunk[sent - start:]
            span = f"bytes {sent}-{end - 1}/{total}" if body else f"bytes */{total}"
            response = self._client()._http.put(
                self._session, data=body, headers={"Content-Range": span},
                timeout=request_timeout())
            if response.status_code not in (200, 201, _RESUME_INCOMPLETE):
                raise _http_error(response)
            if response.status_code == _RESUME_INCOMPLETE:
                return None
            metadata = _json(response)
            if (metadata or {}).get("name") != self._path.key:
                # Not this upload's answer (a connection out of step): ask
                # the session again.
                raise Transient(f"the answer to the last chunk names another object "
                                f"({(metadata or {}).get('name')!r})")
            return metadata

        return put

    def _status(self) -> tuple[int, dict | None]:
        """How many bytes the server has (a status query of the session),
        and the object's metadata if the upload is complete."""
        response = self._client()._http.put(
            self._session, data=b"", headers={"Content-Range": "bytes */*"},
            timeout=request_timeout())
        if response.status_code in (200, 201):  # complete already
            metadata = _json(response) or {}
            return int(metadata.get("size", 0)), metadata
        if response.status_code != _RESUME_INCOMPLETE:
            raise _http_error(response)
        received = response.headers.get("Range")  # "bytes=0-N"
        return (int(received.rpartition("-")[2]) + 1 if received else 0), None

    def _finish(self, rest: bytes) -> str:
        if self._session is not None:  # rest is not empty: write() keeps a byte back
            end = self._offset + len(rest)
            return self._publish(f"upload bytes {self._offset}-{end - 1} (the last)",
                                 self._chunk_request(rest, final=True), _generation)
        blob = self._blob()
        if self.metadata:
            blob.metadata = dict(self.metadata)

        def upload() -> dict:
            blob.upload_from_string(rest, content_type="application/octet-stream", retry=None,
                                    timeout=request_timeout())
            if blob.name != self._path.key or blob.size != len(rest):
                return {}  # another request's answer: the object's metadata decides
            return {"generation": blob.generation}

        return self._publish("upload", upload, _generation)

    def _stat_written(self) -> tuple[int, str, bool]:
        blob = self._client().bucket(self._path.bucket).get_blob(
            self._path.key, retry=None, timeout=request_timeout())
        if blob is None:
            raise FileNotFoundError(errno.ENOENT, f"{self._path.url}: no such object", self._path.url)
        size, generation = int(blob.size or 0), str(blob.generation)
        checks = []
        if blob.md5_hash:
            checks.append(blob.md5_hash == base64.b64encode(self._md5.digest()).decode())
        if blob.crc32c and self._crc32c is not None:
            checks.append(blob.crc32c == base64.b64encode(self._crc32c.digest()).decode())
        # Without a checksum to compare, nothing says it holds what was written.
        return size, generation, size == self._written and bool(checks) and all(checks)

    def _cancel(self) -> None:
        if self._session is not None:  # DELETE cancels; an unfinished one expires anyway
            self._client()._http.delete(self._session, timeout=request_timeout())


def _crc32c() -> Any:
    """A running CRC32C, if google-crc32c has its C implementation (the
    pure-Python one would slow uploads down); else None (MD5 alone)."""
    try:
        import google_crc32c
    except ImportError:
        return None
    return google_crc32c.Checksum() if google_crc32c.implementation == "c" else None


def _json(response: Any) -> dict | None:
    try:
        value = response.json()
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _generation(metadata: dict | None) -> str | None:
    generation = (metadata or {}).get("generation")
    return str(generation) if generation not in (None, "") else None


def _http_error(response: Any) -> Exception:
    """The google.api_core exception for an error response, which
    GcsStore._call maps (transient ones are retried)."""
    from google.api_core import exceptions as api_errors

    return api_errors.from_http_response(response)
