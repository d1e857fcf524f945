"""Storage back-ends for remote bags: `gs://` (google-cloud-storage) and
`s3://` (boto3). Local files never come here: the engine reads them itself.

The engine reads a remote file through a handle with `size` and
`read(offset, length)` (see `RemoteObject`); its read planner coalesces
neighbouring records into one ranged GET and runs up to `max_parallelism`
requests at once. Writers stream into `open_upload` streams (only a bag's
limits wait in a local file) and commit them on close.

Clients come from the SDKs' standard configuration (the environment), or
from the `StorageSettings` in effect (`using`, see `_settings`): each
distinct settings get a store (and clients) of their own.

The rest of sackli imports only this module.
Internal interface: none
"""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

from ._gcs import GcsStore
from ._s3 import S3Store
from ._settings import GcsSettings, S3Settings, StorageSettings, current_settings, using
from ._store import ObjectStat, Store
from ._upload import Upload, UploadFile
from ._urls import RemotePath, is_remote, normalize, parse

__all__ = ["REMOTE_OPENER", "GcsSettings", "ObjectStat", "RemoteObject", "RemoteOpener",
           "S3Settings", "StorageSettings", "Upload", "UploadFile", "copy_object",
           "current_settings", "delete_object", "is_remote", "list_objects", "normalize",
           "object_exists", "open_upload", "put_file", "read_object", "reset_clients",
           "stat_object", "using", "write_object"]

T = TypeVar("T")

# The stores of the standard configuration.
_STORES: dict[str, Store] = {"gs": GcsStore(), "s3": S3Store()}
# The stores of given settings, by (scheme, settings): a few per process
# (one per pipeline's options), each with its clients (rebuilt after a fork).
_CONFIGURED: dict[tuple[str, Any], Store] = {}
_CONFIGURED_LOCK = threading.Lock()


def _store(path: RemotePath, settings: StorageSettings | None = None) -> Store:
    """The store of `path`'s scheme for `settings` (None: the standard
    configuration's)."""
    chosen = settings.for_scheme(path.scheme) if settings is not None else None
    if chosen is None:
        return _STORES[path.scheme]
    key = (path.scheme, chosen)
    with _CONFIGURED_LOCK:
        store = _CONFIGURED.get(key)
        if store is None:
            store = _CONFIGURED[key] = (S3Store(chosen) if isinstance(chosen, S3Settings)
                                        else GcsStore(chosen))
        return store


def _current_store(path: RemotePath) -> Store:
    """The store of `path` for the settings in effect in this context."""
    return _store(path, current_settings())


class RemoteObject:
    """One remote object as the engine reads it: its size, identity and
    metadata (fetched once, on open) and ranged reads with retries, each
    checked to be the range asked for of the version seen at open (a
    replaced object raises OSError instead of serving other bytes)."""

    def __init__(self, url: str, store: Store | None = None) -> None:
        self._path = parse(url)
        self.url = self._path.url
        # Kept (by default the store of the settings in effect now): the
        # engine reads ranges later from its own threads, where the
        # opener's context is not.
        self._store = _current_store(self._path) if store is None else store
        self.size, self.identity, self.metadata = self._store.stat(self._path)

    def read(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length) in one request (with retries)."""
        return self._store.read(self._path, offset, length, self.identity or None)


class RemoteOpener:
    """The engine's hook: a `RemoteObject` for remote paths, None for local.

    With `record=True` it keeps every object it opened in `opened` (URL ->
    RemoteObject), so that whoever opened a bag can check afterwards that
    the objects belong together (`sackli._set_manifest`).

    It uses the storage settings in effect where it was made: the engine
    calls it from its own threads, where the caller's are not."""

    def __init__(self, record: bool = False) -> None:
        self.opened: dict[str, RemoteObject] | None = {} if record else None
        self._settings = current_settings()

    def _settings_now(self) -> StorageSettings | None:
        return self._settings

    def __call__(self, path: str) -> RemoteObject | None:
        if not is_remote(path):
            return None
        remote = RemoteObject(path, _store(parse(path), self._settings_now()))
        if self.opened is not None:
            self.opened[remote.url] = remote
        return remote

    def exists(self, path: str) -> bool | None:
        if not is_remote(path):
            return None
        remote = parse(path)
        return _store(remote, self._settings_now()).exists(remote)


class _FollowingOpener(RemoteOpener):
    """A `RemoteOpener` for Python callers: the settings in effect at each call."""

    def _settings_now(self) -> StorageSettings | None:
        return current_settings()


REMOTE_OPENER: RemoteOpener = _FollowingOpener()


def reset_clients() -> None:
    """Forgets the cached SDK clients (of every store): the next request
    builds new ones from the configuration (environment) as it is then."""
    with _CONFIGURED_LOCK:
        stores = [*_STORES.values(), *_CONFIGURED.values()]
    for store in stores:
        store.reset()


def list_objects(url_prefix: str) -> list[tuple[str, int]]:
    """(url, size) of every object whose URL starts with `url_prefix`."""
    remote = parse(url_prefix, object_name=False)
    return list(_current_store(remote).list(remote))


def open_upload(url: str) -> Upload:
    """A stream that uploads the object `url` as it is written; the object
    appears only on `commit()` (see `Upload`). It keeps the client of the
    settings in effect now, wherever it is written and committed."""
    remote = parse(url)
    return _current_store(remote).open_upload(remote)


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
    return _believing_absence_twice(lambda: _current_store(remote).read_whole(remote))


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
    return _believing_absence_twice(lambda: _current_store(remote).stat(remote))


def put_file(url: str, file: Any, metadata: dict[str, str]) -> str:
    """Uploads the seekable binary `file` as the object `url` with user
    `metadata` (retried from the start of the file); returns the new
    object's identity (S3 ETag, GCS generation)."""
    remote = parse(url)
    store = _current_store(remote)
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
    store = _current_store(remote)
    return store.exists(remote) or store.exists(remote)


def copy_object(source_url: str, target_url: str) -> None:
    """Copies an object within its store, on the server."""
    source, target = parse(source_url), parse(target_url)
    if source.scheme != target.scheme:
        raise ValueError(f"cannot copy {source_url} to {target_url}: different stores")
    _current_store(source).copy(source, target)


def delete_object(url: str) -> None:
    """Deletes the object `url`; a missing one is not an error."""
    remote = parse(url)
    _current_store(remote).delete(remote)
