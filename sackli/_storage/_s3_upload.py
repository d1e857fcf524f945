"""Streaming an object to S3: a multipart upload whose parts leave as they
fill; an object smaller than one part (an empty one too) is one plain PUT,
since S3 refuses a multipart upload without parts."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ._upload import PART_BYTES, UploadState
from ._urls import RemotePath

__all__ = ["S3Upload"]

T = TypeVar("T")
Call = Callable[[str, str, Callable[[], T]], T]


class S3Upload:
    """An `Upload` to `path` with the boto3 client `client()`; `call(what,
    url, request)` maps errors and retries (S3Store._call). Nothing is
    visible until `commit()` (CompleteMultipartUpload or the PUT)."""

    def __init__(self, path: RemotePath, client: Callable[[], Any], call: Call,
                 part_bytes: int = PART_BYTES) -> None:
        self._path = path
        self._client = client
        self._call = call
        self._part_bytes = max(part_bytes, 5 << 20)  # S3's minimum part
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._parts: list[dict] = []
        self._state = UploadState(path.url)

    def write(self, data: bytes) -> None:
        """Appends bytes; uploads each part as it fills."""
        self._state.check_open()
        self._buffer += data
        while len(self._buffer) >= self._part_bytes:
            part = bytes(self._buffer[:self._part_bytes])
            del self._buffer[:self._part_bytes]
            self._send_part(part)

    def _send_part(self, part: bytes) -> None:
        bucket, key = self._path.bucket, self._path.key
        if self._upload_id is None:
            self._upload_id = self._call(
                "start multipart upload", self._path.url,
                lambda: self._client().create_multipart_upload(Bucket=bucket, Key=key))["UploadId"]
        number = len(self._parts) + 1
        response = self._call(
            f"upload part {number}", self._path.url,
            lambda: self._client().upload_part(
                Bucket=bucket, Key=key, UploadId=self._upload_id, PartNumber=number, Body=part))
        self._parts.append({"ETag": response["ETag"], "PartNumber": number})

    def commit(self) -> None:
        """Uploads the rest and completes the object."""
        if self._state.finished:
            return
        bucket, key = self._path.bucket, self._path.key
        try:
            rest, self._buffer = bytes(self._buffer), bytearray()
            if self._upload_id is None:
                self._call("PUT", self._path.url,
                           lambda: self._client().put_object(Bucket=bucket, Key=key, Body=rest))
            else:
                if rest:
                    self._send_part(rest)
                self._call(
                    "complete multipart upload", self._path.url,
                    lambda: self._client().complete_multipart_upload(
                        Bucket=bucket, Key=key, UploadId=self._upload_id,
                        MultipartUpload={"Parts": self._parts}))
        except BaseException:
            self.abort()
            raise
        self._state.finished = True

    def abort(self) -> None:
        """Aborts the multipart upload, if one was started (its parts go)."""
        if self._state.finished:
            return
        self._state.finished = True
        self._buffer = bytearray()
        if self._upload_id is None:
            return
        bucket, key, upload_id = self._path.bucket, self._path.key, self._upload_id
        try:
            self._call("abort multipart upload", self._path.url,
                       lambda: self._client().abort_multipart_upload(
                           Bucket=bucket, Key=key, UploadId=upload_id))
        except (OSError, ValueError):
            pass  # best effort: a bucket lifecycle rule is the backstop
