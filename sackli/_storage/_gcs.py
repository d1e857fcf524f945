"""`gs://` objects through google-cloud-storage (extra `gcs`).

Project and credentials come from the store's `GcsSettings` (Beam: the
pipeline's `--project`, and Beam's credentials when it impersonates a
service account) and, where they leave None, from the client's standard
configuration (application default credentials, `GOOGLE_CLOUD_PROJECT`);
with `STORAGE_EMULATOR_HOST` set the client talks to that server
anonymously. The client's own retries are off: `_retry` retries with one
bound for every back-end.

A batch of ranged reads (`read_many`, the `Store` default) runs its GETs
concurrently on the process's request threads (`_executor`): the client's
HTTP session releases the GIL while it waits, but spends 1.5-1.8 ms of CPU
under it on each request, which bounds a process to about 600 GETs a second
(12-20 in flight at 20 ms). Why not yet a client off the GIL (obstore's
HTTPStore cannot pin a generation on either emulator; its GCSStore can, but
not on gcp-storage-emulator): docs/development.md, "The remote data path".
"""

from __future__ import annotations

import errno
import os
import threading
from typing import Any, Callable, Iterator, TypeVar

from ._gcs_upload import GcsUpload
from ._retry import Transient, request_timeout, with_retries
from ._settings import GcsSettings
from ._store import (ListedObject, ObjectStat, ObjectTail, Store, changed_error,
                     check_content_range, check_identity, tail_size)
from ._urls import RemotePath

__all__ = ["GcsStore"]

T = TypeVar("T")


def _media_url(client: Any, path: RemotePath) -> str:
    """The JSON API's download URL of an object (on the client's endpoint:
    an emulator's with STORAGE_EMULATOR_HOST)."""
    from urllib.parse import quote

    base = client._connection.API_BASE_URL.rstrip("/")
    return f"{base}/download/storage/v1/b/{path.bucket}/o/{quote(path.key, safe='')}"


# Connections kept per host, as boto3's max_pool_connections for S3: requests'
# default of 10 would open and drop a connection for every request of a
# batch beyond the tenth (`remote_parallelism` keeps 32 in flight).
_POOL_CONNECTIONS = 128
# The prefix of a media answer's headers that carry the object's metadata.
_META = "x-goog-meta-"


def _widen_pool(session: Any) -> None:
    """Gives the client's session pools of _POOL_CONNECTIONS per host, where
    it has requests' plain adapters (an mTLS adapter is left as it is)."""
    import requests.adapters

    for prefix in ("https://", "http://"):
        if type(session.adapters.get(prefix)) is requests.adapters.HTTPAdapter:
            session.mount(prefix, requests.adapters.HTTPAdapter(pool_maxsize=_POOL_CONNECTIONS))


def _import_storage() -> Any:
    try:
        from google.cloud import storage
    except ImportError as error:
        raise ImportError(
            "reading or writing gs:// paths needs google-cloud-storage: "
            "pip install 'sackli-bagz[gcs]'"
        ) from error
    return storage


class GcsStore(Store):
    """Requests to Google Cloud Storage, one client per process, built from
    `settings` (None: the client's standard configuration only)."""

    def __init__(self, settings: GcsSettings | None = None) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._client: Any = None
        self._pid = -1

    def reset(self) -> None:
        """Drops the cached client."""
        with self._lock:
            self._client = None

    def _gcs(self) -> Any:
        with self._lock:
            if self._client is None or self._pid != os.getpid():  # fork-safe
                storage = _import_storage()
                given: dict[str, Any] = {}
                if self._settings is not None and self._settings.anonymous:
                    from google.auth.credentials import AnonymousCredentials

                    given["credentials"] = AnonymousCredentials()
                    given["project"] = self._settings.project or "<none>"
                elif self._settings is not None:
                    # Only what is given: the client tells an omitted project
                    # (found in the environment) from project=None (none).
                    if self._settings.project is not None:
                        given["project"] = self._settings.project
                    if self._settings.credentials is not None:
                        given["credentials"] = self._settings.credentials
                self._client = storage.Client(**given)
                _widen_pool(self._client._http)
                self._pid = os.getpid()
            return self._client

    def _call(self, what: str, url: str, request: Callable[[], T]) -> T:
        _import_storage()  # the extra's ImportError first
        from google.api_core import exceptions as api_errors
        import http.client

        import requests
        import urllib3
        from google.auth import exceptions as auth_errors

        def attempt() -> T:
            try:
                return request()
            except api_errors.NotFound:
                raise FileNotFoundError(errno.ENOENT, f"{url}: no such object or bucket", url) from None
            except (api_errors.Forbidden, api_errors.Unauthorized) as error:
                raise PermissionError(errno.EACCES, f"{url}: access denied ({error.code})", url) from None
            except auth_errors.DefaultCredentialsError as error:
                raise PermissionError(errno.EACCES, f"{url}: no Google credentials ({error})", url) from None
            except (api_errors.TooManyRequests, api_errors.InternalServerError,
                    api_errors.BadGateway, api_errors.ServiceUnavailable,
                    api_errors.GatewayTimeout, api_errors.RequestRangeNotSatisfiable) as error:
                if isinstance(error, api_errors.RequestRangeNotSatisfiable):
                    raise OSError(f"{url}: {what}: range not satisfiable") from error
                raise Transient(f"{error.code} {error.message}") from error
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                    # A metadata answer that is not JSON: another request's
                    # bytes, on a connection out of step.
                    requests.exceptions.JSONDecodeError,
                    urllib3.exceptions.HTTPError, http.client.HTTPException,
                    ConnectionError, TimeoutError) as error:
                raise Transient(f"{type(error).__name__}: {error}") from error
            except api_errors.GoogleAPICallError as error:
                raise OSError(f"{url}: {what} failed: {error}") from error

        return with_retries(attempt, f"{url}: {what}")

    def _blob(self, path: RemotePath) -> Any:
        return self._gcs().bucket(path.bucket).blob(path.key)

    def stat(self, path: RemotePath) -> ObjectStat:
        def head() -> ObjectStat:
            blob = self._gcs().bucket(path.bucket).get_blob(path.key, retry=None, timeout=request_timeout())
            if blob is None:
                raise FileNotFoundError(errno.ENOENT, f"{path.url}: no such object", path.url)
            if blob.name != path.key or blob.size is None or blob.generation is None:
                # Another request's answer (a connection out of step).
                raise Transient(f"the metadata answer names {blob.name!r}, size {blob.size}")
            return ObjectStat(int(blob.size), str(blob.generation), dict(blob.metadata or {}))

        return self._call("HEAD", path.url, head)

    def read(self, path: RemotePath, offset: int, length: int,
             identity: str | None = None) -> bytes:
        end = offset + length - 1

        def get() -> bytes:
            data, headers = self._media_get(path, f"bytes={offset}-{end}", identity)
            answered = headers.get("x-goog-generation")
            if identity and answered and answered != identity:
                self._check_unchanged(path, identity)
            check_identity(identity, answered, "generation")
            check_content_range(headers.get("Content-Range"), offset, length, len(data))
            return data

        return self._call(f"GET bytes {offset}-{end}", path.url, get)

    def _check_unchanged(self, path: RemotePath, identity: str) -> None:
        """Raises `changed_error` when the object is no longer generation
        `identity`. Real GCS answers a replaced object's ifGenerationMatch
        download with a 412, but the emulators serve the new bytes, so an
        answer of another generation may be either that or another
        request's answer on a connection out of step: the object's metadata
        tells the two apart (a rare extra request, only on a mismatch)."""
        current = self.stat(path).identity
        if current != identity:
            raise changed_error(path.url, f"generation {identity}", f"generation {current}")

    def read_tail(self, path: RemotePath, length: int) -> ObjectTail:
        """One media GET of `Range: bytes=-length`: the size (the
        Content-Range's total), the generation and the metadata (the
        x-goog-generation and x-goog-meta-* headers) come with the bytes.
        An empty object's 416 (and an answer without a generation) falls
        back to a metadata request (`Store.read_tail`)."""
        from google.api_core import exceptions as api_errors

        def get() -> ObjectTail | None:
            try:
                data, headers = self._media_get(path, f"bytes=-{length}", None)
            except api_errors.RequestRangeNotSatisfiable:
                return None
            generation = headers.get("x-goog-generation")
            if not generation:
                return None
            size = tail_size(headers.get("Content-Range"), length, len(data))
            # Header names carry no case; sackli's metadata keys are lower case.
            metadata = {name[len(_META):].lower(): value for name, value in headers.items()
                        if name.lower().startswith(_META)}
            return ObjectTail(ObjectStat(size, generation, metadata), data)

        tail = self._call(f"GET the last {length} bytes", path.url, get)
        return tail if tail is not None else super().read_tail(path, length)

    def read_whole(self, path: RemotePath) -> bytes:
        # A body cut short raises in urllib3 (it enforces Content-Length),
        # which _call retries.
        return self._call("GET", path.url, lambda: self._media_get(path, None, None)[0])

    def _media_get(self, path: RemotePath, byte_range: str | None,
                   identity: str | None) -> tuple[bytes, Any]:
        """(stored bytes, response headers) of a plain media GET: the
        client's download helpers hide the headers (Content-Range, the
        generation) that the callers check. With `identity`, only of that
        generation: a replaced object answers 412, never other bytes."""
        client = self._gcs()
        params = {"alt": "media"}
        if identity:
            params["ifGenerationMatch"] = identity
        headers = {"Accept-Encoding": "gzip"}  # the stored bytes, never transcoded
        if byte_range:
            headers["Range"] = byte_range
        response = client._http.get(_media_url(client, path), params=params, stream=True,
                                    timeout=request_timeout(), headers=headers)
        with response:
            if identity and response.status_code == 412:
                raise changed_error(path.url, f"generation {identity}", None)
            if response.status_code >= 400:
                from google.api_core import exceptions as api_errors

                raise api_errors.from_http_response(response)
            return response.raw.read(decode_content=False), response.headers

    def _listing(self, path: RemotePath) -> list:
        """The blobs whose names start with `path.key`, checked to be so."""
        def listing() -> list:
            blobs = list(self._gcs().list_blobs(
                path.bucket, prefix=path.key, retry=None, timeout=request_timeout()))
            if any(blob.name is None or not blob.name.startswith(path.key) or blob.size is None
                   for blob in blobs):
                raise Transient("the listing names objects outside its prefix "
                                "(another request's answer)")
            return blobs

        return self._call("LIST", path.url, listing)

    def list_stats(self, path: RemotePath) -> Iterator[tuple[str, ObjectStat]]:
        """(url, stat) of every object whose name starts with `path.key`:
        size, generation and metadata, as `stat` gives them."""
        for blob in self._listing(path):
            yield (f"gs://{path.bucket}/{blob.name}",
                   ObjectStat(int(blob.size), "" if blob.generation is None else str(blob.generation),
                              dict(blob.metadata or {})))

    def list_modified(self, path: RemotePath) -> Iterator[ListedObject]:
        """Every object under `path.key`, written when its `updated` says
        (its `timeCreated` where a server gives no `updated`)."""
        for blob in self._listing(path):
            when = blob.updated or blob.time_created
            if when is None:
                raise OSError(f"gs://{path.bucket}/{blob.name}: the listing gives no time the "
                              "object was written")
            yield ListedObject(f"gs://{path.bucket}/{blob.name}", int(blob.size), when.timestamp())

    def open_upload(self, path: RemotePath) -> GcsUpload:
        """A resumable upload whose chunks leave as they fill."""
        return GcsUpload(path, self._gcs, self._call)

    def copy(self, source: RemotePath, target: RemotePath) -> None:
        """A rewrite: the server copies in steps (large objects, other
        locations) until it returns no continuation token."""
        def rewrite() -> None:
            token = None
            while True:
                token, _, _ = self._blob(target).rewrite(
                    self._blob(source), token=token, retry=None, timeout=request_timeout())
                if token is None:
                    return

        self._call("COPY", f"{source.url} -> {target.url}", rewrite)

    def put_file(self, path: RemotePath, file: Any, metadata: dict[str, str]) -> str:
        """Uploads the seekable binary `file` (from its start) as the
        object, with `metadata`; returns its identity (the generation)."""
        size = file.seek(0, os.SEEK_END)

        def put() -> str:
            file.seek(0)
            blob = self._blob(path)
            blob.metadata = metadata
            # With the size known, up to 8 MiB go in one request.
            blob.upload_from_file(file, size=size, content_type="application/octet-stream",
                                  retry=None, timeout=request_timeout())
            if blob.name != path.key or blob.size != size:
                raise Transient("the answer to the upload is another request's")
            return str(blob.generation)

        return self._call("PUT", path.url, put)

    def delete(self, path: RemotePath) -> None:
        from google.api_core import exceptions as api_errors

        def delete() -> None:
            try:
                self._blob(path).delete(retry=None, timeout=request_timeout())
            except api_errors.NotFound:
                pass  # gone already (perhaps by an earlier attempt)

        self._call("DELETE", path.url, delete)
