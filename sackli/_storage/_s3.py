"""`s3://` objects through boto3 (extra `s3`).

Endpoint, region and credentials come from the store's `S3Settings` (Beam:
the pipeline's `--s3_*` options) and, for every field they leave None, from
boto3's standard configuration (`AWS_ENDPOINT_URL`, `AWS_PROFILE`,
`AWS_ACCESS_KEY_ID`, ~/.aws/...). boto3's own retries are off: `_retry`
retries with one bound for every back-end.

Ranged reads (`read`, `read_many`) go through obstore where it is installed
and the configuration allows (`_s3_ranges`): off the GIL, a batch
concurrently. Everything else, and ranged reads where obstore cannot
honour a setting, goes through boto3.
"""

from __future__ import annotations

import errno
import os
import threading
from typing import Any, Callable, Iterator, TypeVar

from ._executor import DEFAULT_PARALLELISM
from ._retry import Transient, request_timeout, with_retries
from ._s3_ranges import S3Ranges, ranges_for
from ._s3_upload import S3Upload, upload_etag
from ._settings import S3Settings
from ._store import (ListedObject, ObjectStat, ObjectTail, Store, UnfinishedUpload, changed_error,
                     check_content_range, check_identity, read_each, tail_size)
from ._urls import RemotePath, parse

__all__ = ["S3Store"]

T = TypeVar("T")
_NOT_FOUND = {"404", "NoSuchKey", "NoSuchBucket", "NotFound"}
_DENIED = {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
           "AllAccessDisabled", "AccountProblem", "InvalidToken", "ExpiredToken"}
_THROTTLED = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout",
              "RequestTimeTooSkewed", "InternalError", "ServiceUnavailable", "503", "500"}


def _import_boto3() -> Any:
    try:
        import boto3
        import botocore.config
    except ImportError as error:
        raise ImportError(
            "reading or writing s3:// paths needs boto3: pip install 'sackli-bagz[s3]'"
        ) from error
    return boto3, botocore.config


class S3Store(Store):
    """Requests to S3 (or an S3-compatible server), one client per process,
    built from `settings` (None: boto3's standard configuration only)."""

    def __init__(self, settings: S3Settings | None = None) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._client: Any = None
        self._key: tuple[int, float] | None = None
        self._session: Any = None
        # The ranged reads' client (None: boto3's), for `self._ranges_key`.
        self._ranges: S3Ranges | None = None
        self._ranges_key: tuple[int, float] | None = None

    def reset(self) -> None:
        """Drops the cached clients."""
        with self._lock:
            self._client = None
            self._ranges_key = None

    def _s3(self) -> Any:
        # One client per process (fork-safe) and request timeout.
        key = (os.getpid(), request_timeout())
        with self._lock:
            if self._client is None or self._key != key:
                boto3, config = _import_boto3()
                given = self._settings.client_arguments() if self._settings else {}
                # The session resolves the credentials the client uses
                # (given ones first), for obstore's reads too.
                self._session = boto3.session.Session(**{
                    name: given[name] for name in (
                        "aws_access_key_id", "aws_secret_access_key", "aws_session_token")
                    if given.get(name) is not None})
                self._client = self._session.client(
                    "s3",
                    **given,
                    config=config.Config(
                        retries={"total_max_attempts": 1, "mode": "standard"},
                        connect_timeout=key[1],
                        read_timeout=key[1],
                        max_pool_connections=128,
                    ),
                )
                self._key = key
            return self._client

    def _fast(self, path: RemotePath) -> S3Ranges | None:
        """The obstore reader of this process, or None where boto3 reads."""
        client = self._s3()
        with self._lock:
            if self._ranges_key != self._key:
                verify = self._settings.verify if self._settings else None
                self._ranges = ranges_for(client, self._session, verify)
                self._ranges_key = self._key
            ranges = self._ranges
        return ranges if ranges is not None and ranges.supports(path.bucket) else None

    def ranged_client(self, path: RemotePath) -> str:
        """Which client reads ranges of `path`: "obstore" or "boto3"."""
        return "obstore" if self._fast(path) is not None else "boto3"

    def _call(self, what: str, url: str, request: Callable[[], T]) -> T:
        _import_boto3()  # the extra's ImportError first
        from boto3.exceptions import S3UploadFailedError
        from botocore import exceptions as botocore_errors

        def attempt() -> T:
            try:
                try:
                    return request()
                except S3UploadFailedError as upload_error:
                    # The transfer manager wraps the request's own error.
                    cause = upload_error.__cause__ or upload_error.__context__
                    if isinstance(cause, Exception):
                        raise cause from None
                    raise Transient(str(upload_error)) from upload_error
            except botocore_errors.ClientError as error:
                info = error.response.get("Error", {})
                code = str(info.get("Code", ""))
                status = str(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
                if code == "NoSuchUpload":  # the multipart upload, not the object
                    # (Not errno ENOENT: that would make a FileNotFoundError.)
                    raise OSError(f"{url}: {what} failed: the multipart upload no longer exists "
                                  "(completed, aborted or expired)") from error
                if code in _NOT_FOUND or status == "404":
                    raise FileNotFoundError(errno.ENOENT, f"{url}: no such object or bucket", url) from None
                if code in _DENIED or status == "403":
                    raise PermissionError(errno.EACCES, f"{url}: access denied ({code})", url) from None
                if code in _THROTTLED or status.startswith("5") or status == "429":
                    raise Transient(f"{code or status}") from error
                raise OSError(f"{url}: {what} failed: {error}") from error
            except (botocore_errors.NoCredentialsError, botocore_errors.PartialCredentialsError) as error:
                raise PermissionError(errno.EACCES, f"{url}: no AWS credentials ({error})", url) from None
            except (botocore_errors.EndpointConnectionError, botocore_errors.ConnectionError,
                    botocore_errors.HTTPClientError, botocore_errors.FlexibleChecksumError,
                    ConnectionError, TimeoutError) as error:
                # FlexibleChecksumError: a body that does not match the
                # checksum S3 sent with it (damaged on the way).
                raise Transient(f"{type(error).__name__}: {error}") from error

        return with_retries(attempt, f"{url}: {what}")

    def stat(self, path: RemotePath) -> ObjectStat:
        def head() -> ObjectStat:
            response = self._s3().head_object(Bucket=path.bucket, Key=path.key)
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status != 200 or "ContentRange" in response or "ContentLength" not in response:
                # Another request's answer (a connection out of step): a
                # HEAD is a 200 with the object's length, never a range.
                raise Transient(f"not an answer to a HEAD (status {status}, "
                                f"Content-Range {response.get('ContentRange')!r})")
            return ObjectStat(int(response["ContentLength"]), str(response.get("ETag", "")),
                              dict(response.get("Metadata") or {}))

        return self._call("HEAD", path.url, head)

    def read(self, path: RemotePath, offset: int, length: int,
             identity: str | None = None) -> bytes:
        fast = self._fast(path)
        if fast is not None:
            return fast.read(path, offset, length, identity)
        return self._read_boto3(path, offset, length, identity)

    def read_many(self, path: RemotePath, ranges: list[tuple[int, int]],
                  identity: str | None = None,
                  parallelism: int = DEFAULT_PARALLELISM) -> list[bytes | memoryview]:
        fast = self._fast(path)
        if fast is not None:
            return list(fast.read_many(path, ranges, identity, parallelism))
        return read_each(self._read_boto3, path, ranges, identity, parallelism)

    def read_tail(self, path: RemotePath, length: int) -> ObjectTail:
        """One GET of `Range: bytes=-length` (obstore's or boto3's): size,
        ETag and metadata come with the bytes. Where S3 cannot answer so
        (an empty object's 416), a HEAD and a read (`Store.read_tail`)."""
        fast = self._fast(path)
        tail = fast.read_tail(path, length) if fast is not None else self._read_tail_boto3(path, length)
        return tail if tail is not None else super().read_tail(path, length)

    def _read_tail_boto3(self, path: RemotePath, length: int) -> ObjectTail | None:
        from botocore.exceptions import ClientError

        def get() -> ObjectTail | None:
            try:
                response = self._s3().get_object(Bucket=path.bucket, Key=path.key, Range=f"bytes=-{length}")
            except ClientError as error:
                status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if status == 416 or error.response.get("Error", {}).get("Code") == "InvalidRange":
                    return None
                raise
            data = response["Body"].read()  # a dropped body raises a ConnectionError
            if not response.get("ETag"):
                return None
            size = tail_size(response.get("ContentRange"), length, len(data))
            return ObjectTail(ObjectStat(size, str(response["ETag"]), dict(response.get("Metadata") or {})),
                              data)

        return self._call(f"GET the last {length} bytes", path.url, get)

    def _read_boto3(self, path: RemotePath, offset: int, length: int,
                    identity: str | None) -> bytes:
        from botocore.exceptions import ClientError

        def get() -> bytes:
            # If-Match: a replaced object answers 412, never other bytes.
            condition = {"IfMatch": identity} if identity else {}
            try:
                response = self._s3().get_object(
                    Bucket=path.bucket, Key=path.key,
                    Range=f"bytes={offset}-{offset + length - 1}", **condition)
            except ClientError as error:
                status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if identity and (status == 412 or error.response.get("Error", {}).get(
                        "Code") == "PreconditionFailed"):
                    raise changed_error(path.url, f"ETag {identity}", None) from None
                raise
            data = response["Body"].read()  # a dropped body raises a ConnectionError
            check_identity(identity, response.get("ETag"), "ETag")
            check_content_range(response.get("ContentRange"), offset, length, len(data))
            return data

        return self._call(f"GET bytes {offset}-{offset + length - 1}", path.url, get)

    def read_whole(self, path: RemotePath) -> bytes:
        def get() -> bytes:
            response = self._s3().get_object(Bucket=path.bucket, Key=path.key)
            data = response["Body"].read()
            if len(data) != int(response["ContentLength"]):  # a body cut short
                raise Transient(f"{len(data)} of {response['ContentLength']} bytes received")
            return data

        return self._call("GET", path.url, get)

    def _listing(self, path: RemotePath) -> list[dict]:
        """The pages of a ListObjectsV2 of `path.key`, checked to be of it."""
        def pages() -> list[dict]:
            paginator = self._s3().get_paginator("list_objects_v2")
            answers = list(paginator.paginate(Bucket=path.bucket, Prefix=path.key))
            if any(page.get("Prefix", path.key) != path.key or any(
                    not item.get("Key", "").startswith(path.key) or "Size" not in item
                    for item in page.get("Contents", [])) for page in answers):
                raise Transient("the listing is of another prefix (another request's answer)")
            return answers

        return self._call("LIST", path.url, pages)

    def list_stats(self, path: RemotePath) -> Iterator[tuple[str, ObjectStat]]:
        """(url, stat) of every object whose key starts with `path.key`:
        its size and ETag (S3 listings carry no user metadata)."""
        for page in self._listing(path):
            for item in page.get("Contents", []):
                yield (f"s3://{path.bucket}/{item['Key']}",
                       ObjectStat(int(item["Size"]), str(item.get("ETag", "")), {}))

    def list_modified(self, path: RemotePath) -> Iterator[ListedObject]:
        for page in self._listing(path):
            for item in page.get("Contents", []):
                yield ListedObject(f"s3://{path.bucket}/{item['Key']}", int(item["Size"]),
                                   item["LastModified"].timestamp())

    def unfinished_uploads(self, path: RemotePath) -> list[UnfinishedUpload]:
        """The multipart uploads under `path.key` (ListMultipartUploads),
        each with the bytes and times of its parts (ListParts)."""
        def listing() -> list[dict]:
            paginator = self._s3().get_paginator("list_multipart_uploads")
            return [upload for page in paginator.paginate(Bucket=path.bucket, Prefix=path.key)
                    for upload in page.get("Uploads", [])
                    if upload.get("Key", "").startswith(path.key) and "UploadId" in upload]

        found = []
        for upload in self._call("LIST UPLOADS", path.url, listing):
            url = f"s3://{path.bucket}/{upload['Key']}"

            def parts(key: str = upload["Key"], upload_id: str = upload["UploadId"]) -> list[dict]:
                paginator = self._s3().get_paginator("list_parts")
                return [part for page in paginator.paginate(
                    Bucket=path.bucket, Key=key, UploadId=upload_id)
                    for part in page.get("Parts", [])]

            try:
                sent = self._call("LIST PARTS", url, parts)
            except OSError:
                continue  # completed or aborted since it was listed
            times = [upload["Initiated"].timestamp()] + [
                part["LastModified"].timestamp() for part in sent if "LastModified" in part]
            found.append(UnfinishedUpload(url, upload["UploadId"], max(times),
                                          sum(int(part.get("Size", 0)) for part in sent)))
        return found

    def abort_upload(self, upload: UnfinishedUpload) -> None:
        path = parse(upload.url)
        try:
            self._call("abort multipart upload", upload.url,
                       lambda: self._s3().abort_multipart_upload(
                           Bucket=path.bucket, Key=path.key, UploadId=upload.upload_id))
        except FileNotFoundError:
            pass  # gone already

    def open_upload(self, path: RemotePath) -> S3Upload:
        """A multipart upload whose parts leave as they fill."""
        return S3Upload(path, self._s3, self._call)

    def copy(self, source: RemotePath, target: RemotePath) -> None:
        """boto3's managed copy: one CopyObject, or a multipart copy for
        objects over its threshold (CopyObject stops at 5 GB)."""
        self._call("COPY", f"{source.url} -> {target.url}", lambda: self._s3().copy(
            {"Bucket": source.bucket, "Key": source.key}, target.bucket, target.key))

    def put_file(self, path: RemotePath, file: Any, metadata: dict[str, str]) -> str:
        """Uploads the seekable binary `file` (from its start, in one PUT)
        as the object, with `metadata`; returns its identity (the ETag)."""
        size = file.seek(0, 2)

        def put() -> str:
            file.seek(0)
            response = self._s3().put_object(
                Bucket=path.bucket, Key=path.key, Body=file, Metadata=metadata)
            etag = upload_etag(response)
            if etag is not None:
                return etag
            # Perhaps a GET's answer (a connection out of step), and the PUT
            # may not have gone out whole; moto's own answers to a PUT look
            # the same (they carry Last-Modified). The object tells at once,
            # rather than after every attempt: ours (our size and metadata),
            # or again.
            identity = self.uploaded_identity(path, size, metadata)
            if identity is None:
                raise Transient("the answer to the PUT is another request's")
            return identity

        return self._call("PUT", path.url, put)

    def delete(self, path: RemotePath) -> None:
        # S3 answers a deletion of a missing key with success.
        self._call("DELETE", path.url,
                   lambda: self._s3().delete_object(Bucket=path.bucket, Key=path.key))
