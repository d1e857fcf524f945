"""Streaming an object to S3: a multipart upload whose parts leave as they
fill; an object of at most one part (an empty one too) is one plain PUT,
since S3 refuses a multipart upload without parts.

What was written is known by its size and MD5s (one per part): S3's ETag of
a plain PUT is the MD5 of the body, that of a multipart upload the MD5 of
the parts' MD5s with "-<number of parts>". A publishing request (the PUT,
CompleteMultipartUpload) that failed ambiguously is judged by the object's
HEAD against them (see `PartedUpload`).
"""

from __future__ import annotations

import email.utils
import hashlib
import time
from typing import Any, Callable

from ._upload import PART_BYTES, Attempts, PartedUpload
from ._urls import RemotePath

__all__ = ["S3Upload"]

# Seconds either side of the window of a writer's CreateMultipartUpload
# attempts within which an upload of its key counts as one of them: the
# Date header has whole seconds, and the server's clocks may differ a bit.
_STRAY_SLACK = 2.0


class S3Upload(PartedUpload):
    """An `Upload` to `path` with the boto3 client `client()`. Nothing is
    visible until `commit()` (CompleteMultipartUpload or the PUT); `abort()`
    aborts the multipart upload, so its parts do not linger.

    A CreateMultipartUpload whose response was lost (or timed out) may have
    started an upload all the same, which the retry does not know of and
    S3 keeps (and bills) until a lifecycle rule expires it. So when a
    Create attempt failed ambiguously, once the upload started (or, if it
    never did, on abort) the uploads of exactly this key initiated within
    the window of this writer's Create attempts are listed and aborted,
    never the live one. The window is in server time: anchored on the live
    upload's `Initiated` (the same clock as the others'), or without one
    on the Date header of the listing, with `_STRAY_SLACK` either side.
    Another writer's upload of the same key started within those seconds
    would be aborted too (its writer then fails, nothing wrong is
    published)."""

    _identity_name = "ETag"

    def __init__(self, path: RemotePath, client: Callable[[], Any], call: Callable[..., Any],
                 part_bytes: int = PART_BYTES) -> None:
        super().__init__(path, client, call, max(part_bytes, 5 << 20))  # S3's minimum part
        self._upload_id: str | None = None
        self._parts: list[dict] = []
        self._md5s: list[bytes] = []  # of each piece: the parts, or the PUT's body
        # (start, end) wall-clock seconds of the Create attempts when one of
        # them failed ambiguously, until the strays are looked for.
        self._create_window: tuple[float, float] | None = None

    def _account(self, piece: bytes) -> None:
        self._md5s.append(hashlib.md5(piece, usedforsecurity=False).digest())

    def _answered(self, error: BaseException) -> bool:
        from botocore.exceptions import ClientError

        if not isinstance(error, ClientError):
            return False  # no answer: a lost connection, a timeout, a bad body
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return isinstance(status, int) and 400 <= status < 500 and status != 408

    def _metadata_argument(self) -> dict[str, Any]:
        return {"Metadata": self.metadata} if self.metadata else {}

    def _start(self) -> None:
        bucket, key = self._path.bucket, self._path.key
        attempts = Attempts(lambda: self._client().create_multipart_upload(
            Bucket=bucket, Key=key, **self._metadata_argument()), self._answered)
        began = time.time()
        try:
            response = self._call("start multipart upload", self._path.url, attempts)
        finally:
            if attempts.ambiguous:
                self._create_window = (began, time.time())
        self._upload_id = response["UploadId"]
        self._abort_strays()

    def _send_part(self, part: bytes) -> None:
        bucket, key = self._path.bucket, self._path.key
        if self._upload_id is None:
            self._start()
        number = len(self._parts) + 1
        response = self._call(
            f"upload part {number}", self._path.url,
            lambda: self._client().upload_part(
                Bucket=bucket, Key=key, UploadId=self._upload_id, PartNumber=number, Body=part))
        self._parts.append({"ETag": response["ETag"], "PartNumber": number})

    def _finish(self, rest: bytes) -> str:
        bucket, key = self._path.bucket, self._path.key
        if self._upload_id is None:
            return self._publish(
                "PUT", lambda: self._client().put_object(
                    Bucket=bucket, Key=key, Body=rest, **self._metadata_argument()), upload_etag)
        self._send_part(rest)  # not empty: write() keeps a byte back
        parts = list(self._parts)
        return self._publish(
            "complete multipart upload",
            lambda: self._client().complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=self._upload_id,
                MultipartUpload={"Parts": parts}),
            upload_etag)

    def _expected_etags(self) -> set[str]:
        """The ETags an object holding exactly what was written may have."""
        if self._upload_id is None:
            return {f'"{self._md5s[0].hex()}"'} if len(self._md5s) == 1 else set()
        etags = {_multipart_etag(self._md5s)}
        try:  # the parts' own ETags, should the server's differ from their MD5s
            etags.add(_multipart_etag([bytes.fromhex(part["ETag"].strip('"')) for part in self._parts]))
        except (KeyError, ValueError):
            pass
        return etags

    def _stat_written(self) -> tuple[int, str, bool]:
        head = self._client().head_object(Bucket=self._path.bucket, Key=self._path.key)
        size, etag = int(head["ContentLength"]), str(head.get("ETag"))
        return size, etag, size == self._written and etag in self._expected_etags()

    def _cancel(self) -> None:
        if self._upload_id is not None:
            bucket, key, upload_id = self._path.bucket, self._path.key, self._upload_id
            try:
                self._call("abort multipart upload", self._path.url,
                           lambda: self._client().abort_multipart_upload(
                               Bucket=bucket, Key=key, UploadId=upload_id))
            finally:
                self._abort_strays()
        else:
            self._abort_strays()

    def _abort_strays(self) -> None:
        """Aborts the uploads that lost Create attempts may have started
        (see the class); best effort, once."""
        window, self._create_window = self._create_window, None
        if window is None:
            return
        try:
            self._abort_strays_within(*window)
        except Exception:  # noqa: BLE001 - a lifecycle rule expires what is left
            pass

    def _abort_strays_within(self, began: float, ended: float) -> None:
        bucket, key, url = self._path.bucket, self._path.key, self._path.url

        def list_uploads() -> tuple[float, float, list[dict]]:
            before = time.time()
            paginator = self._client().get_paginator("list_multipart_uploads")
            pages = list(paginator.paginate(Bucket=bucket, Prefix=key))
            return before, time.time(), pages

        before, after, pages = self._call("list multipart uploads", url, list_uploads)
        uploads = [upload for page in pages for upload in page.get("Uploads", [])
                   if upload.get("Key") == key and "Initiated" in upload]
        live = [upload for upload in uploads if upload.get("UploadId") == self._upload_id]
        if live:
            # The live upload started in the last attempt; the strays before it.
            newest = live[0]["Initiated"].timestamp()
            low, high = newest - (ended - began) - _STRAY_SLACK, newest + _STRAY_SLACK
        else:
            date = pages[0].get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date") if pages else None
            if not date:
                return
            # Server time minus ours, the Date (whole seconds) taken mid-second.
            offset = email.utils.parsedate_to_datetime(date).timestamp() + 0.5 - (before + after) / 2
            low, high = began + offset - _STRAY_SLACK, ended + offset + _STRAY_SLACK
        for upload in uploads:
            upload_id = upload.get("UploadId")
            if upload_id == self._upload_id or not low <= upload["Initiated"].timestamp() <= high:
                continue
            try:
                self._call("abort stray multipart upload", url,
                           lambda: self._client().abort_multipart_upload(
                               Bucket=bucket, Key=key, UploadId=upload_id))
            except OSError:
                pass  # gone already, or not ours to abort


def upload_etag(response: dict) -> str | None:
    """The ETag of a PutObject or CompleteMultipartUpload answer; None when
    the answer is not one (then the object's metadata decides): on a
    connection out of step (a response sent twice) another request's
    answer can come, such as a GET's, which carries Last-Modified and often
    Content-Range, as these answers never do."""
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    if "last-modified" in headers or "content-range" in headers:
        return None
    etag = response.get("ETag")
    return str(etag) if etag else None


def _multipart_etag(digests: list[bytes]) -> str:
    """S3's ETag of a multipart upload of parts with these MD5s."""
    return f'"{hashlib.md5(b"".join(digests), usedforsecurity=False).hexdigest()}-{len(digests)}"'
