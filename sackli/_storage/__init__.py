"""Storage back-ends for remote bags: `gs://` (google-cloud-storage) and
`s3://` (boto3). Local files never come here: the engine reads them itself.

The engine reads a remote file through a handle with `size` and
`read(offset, length)` (see `RemoteObject`); its read planner coalesces
neighbouring records into one ranged GET and runs up to `max_parallelism`
requests at once. Writers stream into `open_upload` streams (only a bag's
limits wait in a local file) and commit them on close.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ._gcs import GcsStore
from ._s3 import S3Store
from ._store import ObjectStat
from ._upload import Upload, UploadFile
from ._urls import RemotePath, is_remote, normalize, parse

__all__ = ["REMOTE_OPENER", "ObjectStat", "RemoteObject", "RemoteOpener", "Upload", "UploadFile", "copy_object", "delete_object",
           "is_remote", "list_objects", "normalize", "object_exists", "open_upload", "put_file", "read_object",
           "reset_clients", "stat_object", "write_object"]

T = TypeVar("T")

_STORES: dict[str, Any] = {"gs": GcsStore(), "s3": S3Store()}


def _store(path: RemotePath) -> Any:
    return _STORES[path.scheme]


class RemoteObject:
    """One remote object as the engine reads it: its size, identity and
    metadata (fetched once, on open) and ranged reads with retries, each
    checked to be the range asked for of the version seen at open (a
    replaced object raises OSError instead of serving other bytes)."""

    def __init__(self, url: str) -> None:
        self._path = parse(url)
        self.url = self._path.url
        self.size, self.identity, self.metadata = _store(self._path).stat(self._path)

    def read(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length) in one request (with retries)."""
        return _store(self._path).read(self._path, offset, length, self.identity or None)


class RemoteOpener:
    """The engine's hook: a `RemoteObject` for remote paths, None for local.

    With `record=True` it keeps every object it opened in `opened` (URL ->
    RemoteObject), so that whoever opened a bag can check afterwards that
    the objects belong together (`sackli._set_manifest`)."""

    def __init__(self, record: bool = False) -> None:
        self.opened: dict[str, RemoteObject] | None = {} if record else None

    def __call__(self, path: str) -> RemoteObject | None:
        if not is_remote(path):
            return None
        remote = RemoteObject(path)
        if self.opened is not None:
            self.opened[remote.url] = remote
        return remote

    def exists(self, path: str) -> bool | None:
        if not is_remote(path):
            return None
        remote = parse(path)
        return _store(remote).exists(remote)


REMOTE_OPENER = RemoteOpener()


def reset_clients() -> None:
    """Forgets the cached SDK clients: the next request builds new ones from
    the configuration (environment) as it is then."""
    for store in _STORES.values():
        store.reset()


def list_objects(url_prefix: str) -> list[tuple[str, int]]:
    """(url, size) of every object whose URL starts with `url_prefix`."""
    remote = parse(url_prefix, object_name=False)
    return list(_store(remote).list(remote))


def open_upload(url: str, client: Any = None) -> Upload:
    """A stream that uploads the object `url` as it is written; the object
    appears only on `commit()` (see `Upload`). `client`: an SDK client
    (boto3 S3 client, google-cloud-storage Client) to use instead of the one
    sackli builds from the environment."""
    remote = parse(url)
    return _store(remote).open_upload(remote, client)


def _believing_absence_twice(request: Callable[[], T]) -> T:
    """`request()`, asked once more when it says the object is missing.
    What is absent decides how a bag is read (no manifest: a set written
    without one; no schema: raw records), and a 404 is the one answer that
    names nothing to check it by: on a connection out of step (a response
    sent twice) it may be another request's. The second request goes out on
    a connection of its own (the clients' pools drop one with bytes
    pending)."""
    try:
        return request()
    except FileNotFoundError:
        return request()


def read_object(url: str) -> bytes:
    """The whole object, in one GET (FileNotFoundError naming `url` when
    missing, after asking twice)."""
    remote = parse(url)
    return _believing_absence_twice(lambda: _store(remote).read_whole(remote))


def write_object(url: str, data: bytes) -> None:
    """Uploads `data` as the object `url`: it appears whole or not at all."""
    upload = open_upload(url)
    try:
        upload.write(data)
        upload.commit()
    finally:
        upload.abort()  # a no-op once committed


def stat_object(url: str) -> ObjectStat:
    """The object's size, identity (S3 ETag, GCS generation) and metadata;
    FileNotFoundError naming `url` when missing."""
    remote = parse(url)
    return _believing_absence_twice(lambda: _store(remote).stat(remote))


def put_file(url: str, file: Any, metadata: dict[str, str]) -> str:
    """Uploads the seekable binary `file` as the object `url` with user
    `metadata` (retried from the start of the file); returns the new
    object's identity (S3 ETag, GCS generation)."""
    remote = parse(url)
    store = _store(remote)
    try:
        return store.put_file(remote, file, metadata)
    except (FileNotFoundError, PermissionError):
        raise
    except OSError:
        # Ambiguous: the last attempt may have succeeded with its answer
        # lost. The object tells: our size and our metadata, or not ours.
        size = file.seek(0, 2)
        try:
            found = store.stat(remote)
        except OSError:
            found = None
        if found is not None and found.size == size and all(
                found.metadata.get(key) == value for key, value in metadata.items()):
            return found.identity
        raise


def object_exists(url: str) -> bool:
    """Whether the object `url` exists (asked twice before it is believed
    missing)."""
    remote = parse(url)
    store = _store(remote)
    return store.exists(remote) or store.exists(remote)


def copy_object(source_url: str, target_url: str) -> None:
    """Copies an object within its store, on the server."""
    source, target = parse(source_url), parse(target_url)
    if source.scheme != target.scheme:
        raise ValueError(f"cannot copy {source_url} to {target_url}: different stores")
    _store(source).copy(source, target)


def delete_object(url: str) -> None:
    """Deletes the object `url`; a missing one is not an error."""
    remote = parse(url)
    _store(remote).delete(remote)
