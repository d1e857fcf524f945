"""Storage back-ends for remote bags: `gs://` (google-cloud-storage) and
`s3://` (boto3). Local files never come here: the engine reads them itself.

The engine reads a remote file through a handle with `size` and
`read(offset, length)` (see `RemoteObject`); its read planner coalesces
neighbouring records into one ranged GET and runs up to `max_parallelism`
requests at once. Writers stream into `open_upload` streams (only a bag's
limits wait in a local file) and commit them on close.
"""

from __future__ import annotations

from typing import Any

from ._gcs import GcsStore
from ._s3 import S3Store
from ._upload import Upload, UploadFile
from ._urls import RemotePath, is_remote, normalize, parse

__all__ = ["REMOTE_OPENER", "RemoteObject", "Upload", "UploadFile", "copy_object", "delete_object",
           "is_remote", "list_objects", "normalize", "object_exists", "open_upload", "read_object",
           "reset_clients", "write_object"]

_STORES: dict[str, Any] = {"gs": GcsStore(), "s3": S3Store()}


def _store(path: RemotePath) -> Any:
    return _STORES[path.scheme]


class RemoteObject:
    """One remote object as the engine reads it: its size (fetched once, on
    open) and ranged reads with retries."""

    def __init__(self, url: str) -> None:
        self._path = parse(url)
        self.url = self._path.url
        self.size = _store(self._path).size(self._path)

    def read(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length) in one request (with retries)."""
        return _store(self._path).read(self._path, offset, length)


class _RemoteOpener:
    """The engine's hook: a `RemoteObject` for remote paths, None for local."""

    def __call__(self, path: str) -> RemoteObject | None:
        return RemoteObject(path) if is_remote(path) else None

    def exists(self, path: str) -> bool | None:
        if not is_remote(path):
            return None
        remote = parse(path)
        return _store(remote).exists(remote)


REMOTE_OPENER = _RemoteOpener()


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


def read_object(url: str) -> bytes:
    """The whole object, in one GET (FileNotFoundError naming `url` when
    missing)."""
    remote = parse(url)
    return _store(remote).read_whole(remote)


def write_object(url: str, data: bytes) -> None:
    """Uploads `data` as the object `url`: it appears whole or not at all."""
    upload = open_upload(url)
    try:
        upload.write(data)
        upload.commit()
    finally:
        upload.abort()  # a no-op once committed


def object_exists(url: str) -> bool:
    """Whether the object `url` exists."""
    remote = parse(url)
    return _store(remote).exists(remote)


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
