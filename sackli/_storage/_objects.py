"""Objects and files by path or URL: the one place that tells a local path
from a `gs://` / `s3://` URL and hands each to its store (`LocalStore`,
`GcsStore`, `S3Store`), and the engine's hook for remote bags
(`RemoteOpener`)."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from typing import Any, BinaryIO, Callable, Iterable, Iterator, TypeVar

from ._gcs import GcsStore
from ._local import LocalStore, sync_folders as _sync_local_folders
from ._read_cache import ReadCache, read_cache
from ._executor import DEFAULT_PARALLELISM
from ._s3 import S3Store
from ._settings import S3Settings, StorageSettings, current_settings
from ._store import ListedObject, ObjectStat, Store, UnfinishedUpload
from ._upload import Upload, UploadFile
from ._uncached_reads import OutOfOrderWatch
from ._urls import RemotePath, is_remote, parse, remote_path

__all__ = ["CHECKS_KEY", "REMOTE_OPENER", "TAIL_BYTES", "TRAILER_BYTES", "RemoteObject", "RemoteOpener",
           "abort_upload", "atomic_output", "copy_object", "delete_object", "delete_objects",
           "list_modified", "list_objects", "unfinished_uploads",
           "object_exists", "open_local", "open_upload", "opener_for", "put_file", "read_object",
           "remembering_listings", "reset_clients", "stat_object", "sync_folders",
           "write_object"]

T = TypeVar("T")

# How much of a remote object's end its open fetches, with its size and
# identity, in one request: what the engine reads of a remote bag's end at
# open when it loads the limits (IN_MEMORY; native/bagz/shard.cc,
# kRemoteTailBytes: the trailer and the limits of up to 8,191 records) ...
TAIL_BYTES = 64 * 1024
# ... and when it reads them as needed (ON_DISK): the trailer alone.
TRAILER_BYTES = 8

# The metadata key of a raw bag sackli uploads: whether a CRC-32C sidecar
# lies beside it ("crc32c") or not ("none"). Readers then need not ask;
# objects without it (uploaded by other tools) are asked about.
CHECKS_KEY = "sackli-record-checks"
_CHECKS_MARKS = {"crc32c": True, "none": False}

_LOCAL = LocalStore()
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
    replaced object raises OSError instead of serving other bytes).

    With a `cache` (`read_cache`), reads go through it: blocks of this
    version of the object already on local disk are served from there.
    `parallelism`: requests a batch (`read_many`) keeps in flight at most
    (the reader's `remote_parallelism`).

    Without a `stat` or a `cache`, the open is one request
    (`Store.read_tail`): the object's size, identity and metadata and its
    last `tail_bytes` bytes, which serve the engine's first read (a bag's
    trailer and last limits) without another request. With a cache, or
    `tail_bytes=0`, a HEAD (the cache serves whole blocks, which a tail does
    not hold).

    `stat`: what a listing made just before said of the object (its size
    and identity), instead of a request of its own. Reads are pinned to
    that identity as to a HEAD's, so an object replaced since the listing
    raises ESTALE at its first read, never serves other bytes."""

    def __init__(self, url: str | RemotePath, store: Store | None = None,
                 cache: ReadCache | None = None,
                 parallelism: int = DEFAULT_PARALLELISM,
                 stat: ObjectStat | None = None, tail_bytes: int = TAIL_BYTES,
                 watch: OutOfOrderWatch | None = None) -> None:
        self._path = url if isinstance(url, RemotePath) else parse(url)
        self.url = self._path.url
        # Kept (by default the store of the settings in effect now): the
        # engine reads ranges later from its own threads, where the
        # opener's context is not.
        self._store = _current_store(self._path) if store is None else store
        tail: bytes | memoryview = b""
        if stat is None and (cache is not None or tail_bytes == 0):
            # The cache fetches and serves whole blocks (1 MiB), which a
            # tail does not hold: a HEAD costs the same round trip, no bytes.
            stat = self._store.stat(self._path)
        elif stat is None:
            stat, tail = self._store.read_tail(self._path, tail_bytes)
        self.size, self.identity, self.metadata = stat
        self._cache = cache
        self._tail = tail
        self._watch = watch
        self.parallelism = parallelism
        self._cache_key = (None if cache is None
                           else cache.object_key(self._path, self.identity, self.size))

    def read(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length): from the cache, or in one
        request (with retries)."""
        if self._cache_key is not None:
            return self._cache.read(self._cache_key, self.size, offset, length,  # type: ignore[union-attr]
                                    self._fetch_many)
        return self._fetch(offset, length)

    def read_many(self, ranges: list[tuple[int, int]]) -> list[bytes | memoryview]:
        """The bytes of each (offset, length) range, in order: the engine's
        one call for a batch of coalesced ranges."""
        if self._cache_key is not None:
            return self._cache.read_many(self._cache_key, self.size, ranges,  # type: ignore[union-attr,return-value]
                                         self._fetch_many)
        return self._fetch_many(ranges)

    def cache_blocks(self) -> tuple[Any, bytes, int] | None:
        """(the engine's reader of the cache's entries, this version's key,
        the block size) when reads are cached, else None: the engine then
        serves cached blocks itself and asks `fetch_blocks` for the rest."""
        if self._cache_key is None:
            return None
        return self._cache.entries, self._cache_key, self._cache.block_bytes  # type: ignore[union-attr]

    def fetch_blocks(self, blocks: list[int]) -> list[memoryview]:
        """The payload of each of `blocks` (sorted, distinct block numbers
        the engine did not find cached), fetched one range per run at once
        and kept in the cache (`ReadCache.fetch_blocks`)."""
        return self._cache.fetch_blocks(self._cache_key, self.size, blocks,  # type: ignore[union-attr,arg-type]
                                        self._fetch_many)

    def _fetch(self, offset: int, length: int) -> bytes:
        served = self._from_tail([(offset, length)])
        if served is not None:
            return bytes(served[0])
        if self._watch is not None:
            self._watch.note(self.url, [(offset, length)])
        return self._store.read(self._path, offset, length, self.identity or None)

    def _fetch_many(self, ranges: list[tuple[int, int]]) -> list[bytes | memoryview]:
        served = self._from_tail(ranges)
        if served is not None:
            return served  # type: ignore[return-value]
        if self._watch is not None:
            self._watch.note(self.url, ranges)
        return self._store.read_many(self._path, ranges, self.identity or None,
                                     parallelism=self.parallelism)

    def _from_tail(self, ranges: list[tuple[int, int]]) -> list[memoryview] | None:
        """The ranges cut from the tail fetched at open when it holds them
        all, else None. The tail serves one fetch, the first (the engine's
        read of the trailer and last limits), and is dropped then: a reader
        of many shards keeps no 64 KiB of each."""
        tail, self._tail = self._tail, b""
        if not tail:
            return None
        start = self.size - len(tail)
        if not all(offset >= start and offset + length <= self.size for offset, length in ranges):
            return None
        view = memoryview(tail)
        return [view[offset - start:offset - start + length] for offset, length in ranges]


class RemoteOpener:
    """The engine's hook: a `RemoteObject` for remote paths, None for local.

    With `record=True` it keeps every object it opened in `opened` (URL ->
    RemoteObject), so that whoever opened a bag can check afterwards that
    the objects belong together (`sackli._set_manifest`).

    It uses the storage settings in effect where it was made: the engine
    calls it from its own threads, where the caller's are not.

    `known`: the remote paths already told apart and parsed (`opener_for`);
    other paths (local ones, the limits files the engine derives) are told
    apart as they come. `cache`: where the objects' reads are cached
    (`read_cache`), None for no cache. `parallelism`: requests each
    object's batches keep in flight at most. `listed`: URL -> what a
    listing just made said of the object (`remembering_listings`), so that
    opening it needs no request of its own (see `RemoteObject`).
    `tail_bytes`: how much of each object's end its open fetches (see
    `RemoteObject`)."""

    def __init__(self, record: bool = False,
                 known: dict[str, RemotePath | None] | None = None,
                 cache: ReadCache | None = None,
                 parallelism: int = DEFAULT_PARALLELISM,
                 listed: dict[str, ObjectStat] | None = None,
                 tail_bytes: int = TAIL_BYTES,
                 sidecar_of: Callable[[str], str | None] | None = None,
                 listed_names: frozenset[str] = frozenset()) -> None:
        self.opened: dict[str, RemoteObject] | None = {} if record else None
        self._settings = current_settings()
        self._known = known or {}
        self._cache = cache
        self._parallelism = parallelism
        self._listed = listed or {}
        self._tail_bytes = tail_bytes
        # Reads with no cache are watched for a shuffled epoch (a warning).
        self._watch = OutOfOrderWatch()
        # `sidecar_of(url)`: the CRC-32C sidecar the engine will look for
        # beside the bag `url` (None: it will not look). A bag sackli uploaded
        # says in its metadata whether it has one (CHECKS_KEY), so the
        # engine's question (`exists`) costs no request: sidecar -> answer.
        self._sidecar_of = sidecar_of
        # Every URL the listings that found the bags returned: a listing of
        # a prefix that holds a bag's name holds its sidecar's too.
        self._listed_names = listed_names
        self._sidecars: dict[str, bool] = {}
        self._sidecars_lock = threading.Lock()

    def _parsed(self, path: str) -> RemotePath | None:
        return self._known[path] if path in self._known else remote_path(path)

    def _settings_now(self) -> StorageSettings | None:
        return self._settings

    def _cache_now(self) -> ReadCache | None:
        return self._cache

    def __call__(self, path: str) -> RemoteObject | None:
        parsed = self._parsed(path)
        if parsed is None:
            return None
        cache = self._cache_now()
        remote = RemoteObject(parsed, _store(parsed, self._settings_now()), cache,
                              self._parallelism, self._listed.get(parsed.url), self._tail_bytes,
                              self._watch if cache is None else None)
        sidecar = self._sidecar_of(parsed.url) if self._sidecar_of is not None else None
        if sidecar is not None:
            mark = remote.metadata.get(CHECKS_KEY)
            known = (_CHECKS_MARKS[mark] if mark in _CHECKS_MARKS
                     else sidecar in self._listed_names if parsed.url in self._listed_names
                     else None)
            if known is not None:
                with self._sidecars_lock:
                    self._sidecars[sidecar] = known
        if self.opened is not None:
            self.opened[remote.url] = remote
        return remote

    def exists(self, path: str) -> bool | None:
        with self._sidecars_lock:
            known = self._sidecars.pop(path, None)
        if known is not None:
            return known
        remote = self._parsed(path)
        if remote is None:
            return None
        return _store(remote, self._settings_now()).exists(remote)



class _FollowingOpener(RemoteOpener):
    """A `RemoteOpener` for Python callers: the settings in effect at each
    call, and the cache the environment names then (`SACKLI_CACHE_DIR`)."""

    def __init__(self) -> None:
        # A HEAD first: these callers (maps) read their files from the start.
        super().__init__(tail_bytes=0)

    def _settings_now(self) -> StorageSettings | None:
        return current_settings()

    def _cache_now(self) -> ReadCache | None:
        return read_cache()


REMOTE_OPENER: RemoteOpener = _FollowingOpener()


def opener_for(paths: list[str], cache_dir: str | None = None,
               cache_max_bytes: int | None = None,
               parallelism: int = DEFAULT_PARALLELISM,
               listed: dict[str, ObjectStat] | None = None,
               shared_cache: bool | None = None,
               tail_bytes: int = TAIL_BYTES,
               sidecar_of: Callable[[str], str | None] | None = None,
               listed_names: frozenset[str] = frozenset()) -> RemoteOpener | None:
    """The engine's opener for a bag of `paths` (canonical, see
    `canonical_path`): a recording `RemoteOpener` when any is remote, None
    when all are local (the engine then opens them without calling back
    into Python). Each path is told apart here, once: the opener keeps the
    answers. Its objects' reads are cached as `read_cache(cache_dir,
    cache_max_bytes, shared_cache)` says (by default, as the environment
    says); their
    batches keep at most `parallelism` requests in flight; `listed`
    objects open without a request of their own; the others fetch the last
    `tail_bytes` bytes with their size; `sidecar_of` names the sidecar the
    engine will ask for beside each bag, answered without a request where
    the bag's metadata or `listed_names` (every URL the listings returned)
    tell (`RemoteOpener`)."""
    known: dict[str, RemotePath | None] = {}
    any_remote = False
    for path in paths:
        if is_remote(path):
            any_remote = True
            try:
                known[path] = parse(path)
            except ValueError:
                pass  # raised when the engine opens it, in its turn
    if not any_remote:
        return None
    return RemoteOpener(record=True, known=known, cache=read_cache(cache_dir, cache_max_bytes, shared_cache),
                        parallelism=parallelism, listed=listed, tail_bytes=tail_bytes,
                        sidecar_of=sidecar_of, listed_names=listed_names)


def reset_clients() -> None:
    """Forgets the cached SDK clients (of every store): the next request
    builds new ones from the configuration (environment) as it is then."""
    with _CONFIGURED_LOCK:
        stores = [*_STORES.values(), *_CONFIGURED.values()]
    for store in stores:
        store.reset()


# The listings' answers, while a `remembering_listings` block is active.
_LISTED: contextvars.ContextVar[dict[str, ObjectStat] | None] = contextvars.ContextVar(
    "sackli_listed", default=None)


@contextlib.contextmanager
def remembering_listings() -> Iterator[dict[str, ObjectStat]]:
    """A dict that collects, during the block, URL -> stat of every remote
    object that `list_objects` lists in this context (a `name@*.ext` or a
    glob being expanded), so that opening them next needs no metadata
    request each (`opener_for(listed=...)`)."""
    listed: dict[str, ObjectStat] = {}
    token = _LISTED.set(listed)
    try:
        yield listed
    finally:
        _LISTED.reset(token)


def list_modified(url_prefix: str) -> list[ListedObject]:
    """Every remote object whose URL starts with `url_prefix`, with its size
    and when it was written (by the server's clock)."""
    remote = parse(url_prefix, object_name=False)
    return list(_current_store(remote).list_modified(remote))


def unfinished_uploads(url_prefix: str) -> list[UnfinishedUpload]:
    """The unfinished uploads to remote keys starting with `url_prefix`
    (S3's multipart uploads; GCS lists none: see `Store.unfinished_uploads`)."""
    remote = parse(url_prefix, object_name=False)
    return _current_store(remote).unfinished_uploads(remote)


def abort_upload(upload: UnfinishedUpload) -> None:
    """Aborts an unfinished upload `unfinished_uploads` listed."""
    _current_store(parse(upload.url)).abort_upload(upload)


def list_objects(url_prefix: str) -> list[tuple[str, int]]:
    """(url, size) of every object whose URL starts with `url_prefix`; for
    a local prefix, (path, size) of every file in its folder and below
    whose path starts with it."""
    if not is_remote(url_prefix):
        return list(_LOCAL.list(url_prefix))
    remote = parse(url_prefix, object_name=False)
    stats = list(_current_store(remote).list_stats(remote))
    listed = _LISTED.get()
    if listed is not None:
        listed.update(stats)
    return [(url, stat.size) for url, stat in stats]


def open_local(path: str) -> BinaryIO | None:
    """`path` opened for reading when it names a file of this machine (the
    caller closes it); None for a remote object, whose bytes cost requests.
    OSError as `open()` raises it (IsADirectoryError for a folder)."""
    return None if is_remote(path) else open(path, "rb")


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
    missing, after asking twice), or the whole local file."""
    if not is_remote(url):
        return _LOCAL.read_whole(url)
    remote = parse(url)
    return _believing_absence_twice(lambda: _current_store(remote).read_whole(remote))


def write_object(url: str, data: bytes, *, durable: bool = False) -> None:
    """Writes `data` as the object or file `url`: it appears whole or not at
    all (see `atomic_output`)."""
    with atomic_output(url, durable=durable) as file:
        file.write(data)


@contextlib.contextmanager
def atomic_output(url: str, *, durable: bool = False) -> Iterator[BinaryIO]:
    """A write-only binary file that becomes the object or file `url` when
    the block ends without error, whole; on error nothing appears and
    nothing is left. A local file is written under a hidden temporary name
    and renamed (FileNotFoundError when its folder is missing; a symbolic
    link is written through); `durable`: fsynced before the rename, its
    folder after. An object streams into an upload that completes then (it
    is committed durably by its store anyway)."""
    if not is_remote(url):
        with _LOCAL.writing(url, durable=durable) as file:
            yield file
        return
    upload = open_upload(url)
    try:
        yield UploadFile(upload, url)
        upload.commit()
    finally:
        upload.abort()  # a no-op once committed


def stat_object(url: str) -> ObjectStat:
    """The object's size, identity (S3 ETag, GCS generation; a local file's
    mtime and inode) and metadata; FileNotFoundError naming `url` when
    missing."""
    if not is_remote(url):
        return _LOCAL.stat(url)
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
        identity = store.uploaded_identity(remote, file.seek(0, 2), metadata)
        if identity is not None:
            return identity
        raise


def object_exists(url: str) -> bool:
    """Whether the object `url` exists (asked twice before it is believed
    missing); locally, whether anything (file, folder or link) has the
    name."""
    if not is_remote(url):
        return _LOCAL.exists(url)
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
    """Deletes the object or file `url`; a missing one is not an error."""
    if not is_remote(url):
        _LOCAL.delete(url)
        return
    remote = parse(url)
    _current_store(remote).delete(remote)


def delete_objects(urls: Iterable[str]) -> None:
    """Deletes each object or file; missing ones are not an error."""
    for url in urls:
        delete_object(url)


def sync_folders(paths: Iterable[str]) -> None:
    """fsyncs the folder of each local path (each once), so that names
    renamed into them survive power loss; remote paths need nothing (an
    object is committed durably)."""
    _sync_local_folders(path for path in paths if not is_remote(path))
