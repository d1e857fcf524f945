"""Streaming an object to S3: a multipart upload whose parts leave as they
fill; an object of at most one part (an empty one too) is one plain PUT,
since S3 refuses a multipart upload without parts."""

from __future__ import annotations

from typing import Any, Callable

from ._upload import PART_BYTES, PartedUpload
from ._urls import RemotePath

__all__ = ["S3Upload"]


class S3Upload(PartedUpload):
    """An `Upload` to `path` with the boto3 client `client()`. Nothing is
    visible until `commit()` (CompleteMultipartUpload or the PUT); `abort()`
    aborts the multipart upload, so its parts do not linger."""

    def __init__(self, path: RemotePath, client: Callable[[], Any], call: Callable[..., Any],
                 part_bytes: int = PART_BYTES) -> None:
        super().__init__(path, client, call, max(part_bytes, 5 << 20))  # S3's minimum part
        self._upload_id: str | None = None
        self._parts: list[dict] = []

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

    def _finish(self, rest: bytes) -> None:
        bucket, key = self._path.bucket, self._path.key
        if self._upload_id is None:
            self._call("PUT", self._path.url,
                       lambda: self._client().put_object(Bucket=bucket, Key=key, Body=rest))
            return
        self._send_part(rest)  # not empty: write() keeps a byte back
        self._call(
            "complete multipart upload", self._path.url,
            lambda: self._client().complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=self._upload_id,
                MultipartUpload={"Parts": self._parts}))

    def _cancel(self) -> None:
        if self._upload_id is None:
            return
        bucket, key, upload_id = self._path.bucket, self._path.key, self._upload_id
        self._call("abort multipart upload", self._path.url,
                   lambda: self._client().abort_multipart_upload(
                       Bucket=bucket, Key=key, UploadId=upload_id))
