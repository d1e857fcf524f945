"""A local cache of remote reads: the bytes fetched from `gs://` and `s3://`
objects, kept on local disk and shared by every process on the host
(DataLoader workers, several jobs), so that a second pass over the same
records downloads nothing.

Objects are cut into blocks of `BLOCK_BYTES`; a read is served block by
block from the cache, and the blocks it lacks are fetched in one ranged
request per contiguous run, published, and assembled into the answer. An
epoch over a bag thus fetches each block once, in whatever order its
records are read.

Layout (docs/cache.md): `<cache_dir>/v1/<2 hex>/<key>-<block>`, one flat
file per block, where `key` is the SHA-256 of (scheme, bucket, object key,
identity (S3 ETag, GCS generation), size, block size): a replaced object has
new keys, so its old blocks are never served and simply age out. Beside the
folders, `v1/usage` holds the bytes the cache holds (an upper bound), and is
the lock every writer takes (`fcntl.flock`); `v1/secret` is the key of the
entries' seals.

The folder is the user's own unless a shared cache is asked for
(`_cache_folder`: folders 0700, files 0600, a folder others own or can
write refused; nothing written through a link), and `v1/secret` seals
every entry: one made without it is a miss.

Entries are read by the engine (`sackli._engine.BlockCache`,
native/bagz/block_cache.h), for the engine's own reads of remote bags
without Python, and for this module's: it finds an entry by its key, checks
its header, and checks every chunk a read touches. This module keeps the
misses: claims, fetches, publishing, the budget and eviction.

Guarantees:
- An entry is written under a temporary name in its folder and renamed into
  place while holding the lock: readers see a whole entry or none.
- Every entry (format 3) carries a CRC-32C of each 1 KiB chunk of its
  payload, and its header (which names its key and block, and holds the
  CRCs) is sealed with a SipHash-2-4 tag under the cache's secret. Every
  byte served is checked against them when it is read, so a damaged,
  truncated or foreign file (a link, an entry of an older format, one
  sealed without the secret) is dropped and fetched again, never served.
  No fsync: damage is detected instead.
- The budget: `usage` is raised before an entry is published (a crash leaves
  it high, never low); when it would exceed `max_bytes`, the writer holding
  the lock lists the cache, counts what is really there, deletes the least
  recently used entries (oldest mtime; a hit touches its entry) down to
  `LOW_WATER` of the budget, removes temporary files left by crashed
  writers, and rewrites `usage`.
- Files are read with `os.pread`, never mapped: a truncated file raises or
  reads short, never SIGBUS.

Each process keeps a few verified entries open (`OPEN_ENTRIES`), so a small
record costs a `pread` of the chunks it spans and their CRCs, not a fresh
open and a check of the whole block.

The engine's half comes from the core (`use_cache_engine`, when sackli loads the
engine): this package imports no other sackli module.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import threading
import warnings
import weakref
from typing import Any, Callable, Sequence

from . import _cache_folder
from ._paths import path_argument
from ._urls import RemotePath, is_remote

__all__ = ["BLOCK_BYTES", "DEFAULT_MAX_BYTES", "ReadCache", "read_cache", "use_cache_engine"]

# 1 MiB blocks: a ranged GET costs tens of milliseconds before its first
# byte, about what 1 MiB takes to arrive, so fetching the whole block for a
# small record at most doubles that request's cost, while a large read (the
# engine coalesces batches into runs of up to 8 MiB) fetches its blocks in
# one request. A 1 TB cache is a million files, some 4,000 per folder.
BLOCK_BYTES = 1 << 20
# The budget when only a folder is given.
DEFAULT_MAX_BYTES = 10 << 30
# An eviction frees space down to this fraction of the budget, so that it
# runs once per tenth of the budget written, not on every insert.
LOW_WATER = 0.9
# Verified entries each process keeps open (an evicted one's blocks stay on
# disk until its descriptor closes: at most this many blocks per process).
OPEN_ENTRIES = 64
# The checked payload bytes of those entries each process keeps in memory,
# so that a hit is a copy, not a read of the file (docs/cache.md).
MEMORY_BYTES = 64 << 20
# A hit touches its entry (its recency, for eviction) at most this often.
TOUCH_SECONDS = 60.0

ENV_DIR = "SACKLI_CACHE_DIR"
ENV_MAX_BYTES = "SACKLI_CACHE_MAX_BYTES"

# The layout (folders, names, `usage` and its lock, `secret`); the entries'
# own format is in their header (3: sealed; entries of formats 1 and 2 are
# misses, replaced when read, evicted otherwise).
_VERSION_DIR = "v1"
_USAGE = "usage"
_TEMPORARY = ".tmp-"
_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


# `sackli._engine.BlockCache`, given by `use_cache_engine`.
_ENGINE_CACHE: Any = None


def use_cache_engine(block_cache: type) -> None:
    """Gives this module the engine's reader of entries
    (`sackli._engine.BlockCache`); the core calls it when it loads the
    engine."""
    global _ENGINE_CACHE
    _ENGINE_CACHE = block_cache


def _header_bytes(length: int) -> int:
    """The bytes of an entry's header before a payload of `length` bytes."""
    return _ENGINE_CACHE.header_bytes(length)


class ReadCache:
    """One cache folder with its budget, as this process uses it (see the
    module doc). Thread-safe; `read_cache` shares one per folder and budget.

    Args:
      folder: the cache folder (created, 0700, when missing).
      max_bytes: the budget: the bytes of every file in the cache.
      shared: a cache shared with other users (docs/cache.md): the folder
        may be theirs or writable by them, and what it creates is
        shared with the folder's group. Private (False): PermissionError
        for such a folder.
    """

    def __init__(self, folder: str, max_bytes: int, shared: bool = False) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.shared = shared
        self.block_bytes = BLOCK_BYTES
        self._root = os.path.join(folder, _VERSION_DIR)
        self._modes = _cache_folder.open_layout(folder, _VERSION_DIR, shared)
        self._lock = threading.Lock()
        self._warned = False
        # The engine's reader of the entries (shared with the remote byte
        # sources of this cache's objects: `cache_blocks`).
        self.entries = _ENGINE_CACHE(self._root, self._secret(), OPEN_ENTRIES, TOUCH_SECONDS,
                                     MEMORY_BYTES)
        # Blocks being fetched by a thread of this process (`_claim`).
        self._fetching: dict[tuple[bytes, int], threading.Event] = {}
        _LIVE.add(self)

    def __repr__(self) -> str:
        shared = ", shared=True" if self.shared else ""
        return f"ReadCache({self.folder!r}, max_bytes={self.max_bytes}{shared})"

    def _secret(self) -> bytes:
        """The cache's secret, made if it has none. A cache that cannot make
        one (read-only to this user), or a shared one whose secret this user
        cannot read, gets a secret of this process's own: nothing is served
        from it, and reads go on from the network."""
        try:
            secret = _cache_folder.read_secret(self._root, self.shared)
            if secret is not None:
                return secret
            with _Usage(self._root, self._modes):
                return _cache_folder.make_secret(self._root, self._modes, self.shared)
        except OSError as error:
            if isinstance(error, _cache_folder.RefusedFolder):
                raise  # a private cache's secret that is not the user's
            self._warn(error)
            return os.urandom(_cache_folder.SECRET_BYTES)

    def _warn(self, error: OSError) -> None:
        """Warns once that this cache cannot keep what is fetched."""
        if not self._warned:
            self._warned = True
            warnings.warn(f"sackli read cache {self.folder}: cannot keep fetched bytes "
                          f"({error}); reads go on, served from the network", RuntimeWarning,
                          stacklevel=3)

    def object_key(self, path: RemotePath, identity: str, size: int) -> bytes | None:
        """The key of the blocks of one version of an object, None when it
        has no identity to tell versions apart (then it is not cached)."""
        if not identity:
            return None
        named = "\0".join((path.scheme, path.bucket, path.key, identity, str(size),
                           str(self.block_bytes)))
        return hashlib.sha256(named.encode("utf-8", "surrogatepass")).digest()

    def entry_path(self, key: bytes, block: int) -> str:
        """Where block `block` of the object keyed `key` is kept."""
        name = key.hex()
        return os.path.join(self._root, name[:2], f"{name}-{block}")

    # --- Reading ----------------------------------------------------------

    def read(self, key: bytes, size: int, offset: int, length: int,
             fetch_many: Callable[[list[tuple[int, int]]], Sequence[bytes | memoryview]]
             ) -> bytes:
        """Bytes [offset, offset + length) of the object keyed `key` (`size`
        bytes long): cached blocks from disk, the others fetched as
        `fetch_blocks` does."""
        return self.read_many(key, size, [(offset, length)], fetch_many)[0]

    def read_many(self, key: bytes, size: int, ranges: Sequence[tuple[int, int]],
                  fetch_many: Callable[[list[tuple[int, int]]], Sequence[bytes | memoryview]]
                  ) -> list[bytes]:
        """The bytes of each (offset, length) range of the object keyed
        `key`, `size` bytes long: what is cached read by the engine, the
        missing blocks of all the ranges fetched together (`fetch_blocks`)."""
        step = self.block_bytes
        parts: list[list[Any]] = []  # per range: [block, lo, hi, bytes or None]
        missing: set[int] = set()
        for offset, length in ranges:
            pieces = []
            end = offset + length
            for block in range(offset // step, (end - 1) // step + 1) if length > 0 else ():
                base = block * step
                lo, hi = max(offset, base) - base, min(end, base + step) - base
                piece = self.entries.read(key, block, min(step, size - base), lo, hi)
                if piece is None:
                    missing.add(block)
                pieces.append([block, lo, hi, piece])
            parts.append(pieces)
        if missing:
            wanted = sorted(missing)
            fetched = dict(zip(wanted, self.fetch_blocks(key, size, wanted, fetch_many)))
            for pieces in parts:
                for piece in pieces:
                    if piece[3] is None:
                        piece[3] = fetched[piece[0]][piece[1]:piece[2]]
        out: list[bytes] = []
        for pieces in parts:
            if len(pieces) == 1 and isinstance(pieces[0][3], bytes):
                out.append(pieces[0][3])
            else:
                out.append(b"".join(piece[3] for piece in pieces))
        return out

    def fetch_blocks(self, key: bytes, size: int, blocks: Sequence[int],
                     fetch_many: Callable[[list[tuple[int, int]]], Sequence[bytes | memoryview]]
                     ) -> list[memoryview]:
        """The payload of each of `blocks` (sorted, distinct; missing from
        the cache) of the object keyed `key`, `size` bytes long, fetched and
        kept: `fetch_many(ranges)` gets one (offset, length) per contiguous
        run of them at once. A block another thread of this process is
        fetching is waited for, not fetched twice. Entries the engine found
        damaged are dropped first, so that their blocks are kept again."""
        self._drop_damaged()
        step = self.block_bytes
        payloads: dict[int, memoryview] = {}
        mine, theirs = self._claim(key, list(blocks))
        try:
            self._fetch_runs(key, size, mine, fetch_many, payloads)
        finally:
            self._settle(key, mine)
        again: list[int] = []
        for block, fetched in theirs:
            fetched.wait()
            length = min(step, size - block * step)
            piece = self._cached(key, block, length, 0, length)
            if piece is None:  # that fetch failed, or its block was not kept
                again.append(block)
            else:
                payloads[block] = memoryview(piece)
        if again:
            self._fetch_runs(key, size, again, fetch_many, payloads)
        return [payloads[block] for block in blocks]

    def _fetch_runs(self, key: bytes, size: int, blocks: list[int],
                    fetch_many: Callable[[list[tuple[int, int]]], Sequence[bytes | memoryview]],
                    payloads: dict[int, memoryview]) -> None:
        """Fetches `blocks` (sorted), one range per contiguous run, all at
        once; publishes each block and puts its payload in `payloads`."""
        step = self.block_bytes
        runs = _runs(blocks)
        ranges = [(first * step, min(size, (last + 1) * step) - first * step)
                  for first, last in runs]
        if not ranges:
            return
        for (first, last), data in zip(runs, fetch_many(ranges)):
            data = memoryview(data)
            for block in range(first, last + 1):
                at = (block - first) * step
                payload = data[at:at + step]
                self._publish(key, block, payload)
                payloads[block] = payload

    def _claim(self, key: bytes, blocks: list[int]
               ) -> tuple[list[int], list[tuple[int, threading.Event]]]:
        """Splits missing `blocks` into those this thread fetches (now
        marked as being fetched) and those another thread of this process
        is fetching already, each with the event set when it is done (the
        engine's threads read neighbouring ranges at once: without this a
        first epoch would fetch a shared block once per thread)."""
        mine: list[int] = []
        theirs: list[tuple[int, threading.Event]] = []
        with self._lock:
            for block in blocks:
                fetching = self._fetching.get((key, block))
                if fetching is None:
                    self._fetching[(key, block)] = threading.Event()
                    mine.append(block)
                else:
                    theirs.append((block, fetching))
        return mine, theirs

    def _settle(self, key: bytes, blocks: list[int]) -> None:
        """Ends this thread's fetches of `blocks` (kept or failed): threads
        waiting for them look in the cache again."""
        with self._lock:
            done = [self._fetching.pop((key, block)) for block in blocks]
        for fetched in done:
            fetched.set()

    def _cached(self, key: bytes, block: int, length: int, lo: int, hi: int) -> bytes | None:
        """Payload bytes [lo, hi) of a cached block (`length` bytes), None
        when it is not cached (or was damaged: then it is dropped)."""
        data = self.entries.read(key, block, length, lo, hi)
        if data is None:
            self._drop_damaged()
        return data

    def _drop_damaged(self) -> None:
        """Deletes the damaged entries the engine's reads found (the files
        they found: a good entry published since stays)."""
        for key, block, device, inode in self.entries.take_damaged():
            self._unlink_if(self.entry_path(key, block), (device, inode))

    def _unlink_if(self, path: str, ino: tuple[int, int]) -> None:
        """Deletes a damaged entry if `path` still is that file (`ino`; a
        link itself, not what it names); under the lock, so that a good
        entry published meanwhile stays."""
        try:
            with _Usage(self._root, self._modes):
                status = os.lstat(path)
                if (status.st_dev, status.st_ino) == ino:
                    os.unlink(path)
        except OSError:
            pass  # gone already, or the cache is unwritable: nothing to drop

    # --- Writing ----------------------------------------------------------

    def _publish(self, key: bytes, block: int, payload: memoryview) -> None:
        """Keeps a fetched block, within the budget. A cache that cannot be
        written (full disk, permissions) warns once: the reads are served
        all the same."""
        header = self.entries.encode_header(key, block, payload)
        size = len(header) + len(payload)
        if size > self.max_bytes:
            return
        path = self.entry_path(key, block)
        folder, name = os.path.split(path)
        try:
            with _Usage(self._root, self._modes) as usage:
                if os.path.lexists(path) and self.entries.read(key, block, len(payload), 0,
                                                               1) is not None:
                    return  # another writer published it meanwhile
                # Anything else there (damaged, foreign, a link that another
                # thread will drop) is replaced.
                total = usage.total
                if total is None or total + size > self.max_bytes:
                    total = self._evict(size)
                usage.write(total + size)  # raised before the entry appears
                # Written and renamed within the folder opened (never
                # through a link put in its place).
                folder_fd = _cache_folder.open_subfolder(self._root, os.path.basename(folder),
                                                         self._modes)
                try:
                    temporary = f"{_TEMPORARY}{os.getpid()}-{threading.get_ident()}"
                    fd = _cache_folder.create_new(temporary, self._modes.file, folder_fd)
                    try:
                        _write_all(fd, header)
                        _write_all(fd, payload)
                    finally:
                        os.close(fd)
                    os.replace(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
                finally:
                    os.close(folder_fd)
        except OSError as error:
            self._warn(error)

    def _evict(self, incoming: int) -> int:
        """Counts the cache (under the lock), deletes temporary files (none
        is being written: writers hold the lock) and, when `incoming` more
        bytes would exceed the budget, the least recently used entries down
        to LOW_WATER of it; returns the bytes left."""
        entries: list[tuple[int, int, str]] = []
        total = 0
        for counted in (_USAGE, _cache_folder.SECRET):  # in the budget too
            try:
                total += os.lstat(os.path.join(self._root, counted)).st_size
            except FileNotFoundError:
                pass
        for folder in os.scandir(self._root):
            if not folder.is_dir(follow_symlinks=False):
                continue
            for item in os.scandir(folder.path):
                try:
                    status = item.stat(follow_symlinks=False)
                    if item.name.startswith(_TEMPORARY):
                        os.unlink(item.path)
                        continue
                except FileNotFoundError:
                    continue
                entries.append((status.st_mtime_ns, status.st_size, item.path))
                total += status.st_size
        if total + incoming <= self.max_bytes:
            return total
        target = int(self.max_bytes * LOW_WATER) - incoming
        entries.sort()
        for _, size, path in entries:
            if total <= target:
                break
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            total -= size
        return total

    def forget_open(self) -> None:
        """Closes the entries this process keeps open (the engine closes
        them in a forked child itself) and, after a fork, forgets the
        parent's fetches in flight: their threads are not in the child, so
        nothing would end them (and the lock may have been held by one)."""
        self._lock = threading.Lock()
        self._fetching = {}
        self.entries.forget()


class _Usage:
    """The cache's lock and byte count: `v1/usage`, held with `flock` (a
    fresh open each time, so that threads and forked processes exclude each
    other too), never opened through a link."""

    def __init__(self, root: str, modes: _cache_folder.FolderModes) -> None:
        self._path = os.path.join(root, _USAGE)
        self._modes = modes
        self.total: int | None = None

    def __enter__(self) -> "_Usage":
        self._fd = _cache_folder.open_file(self._path, self._modes)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            text = os.pread(self._fd, 32, 0)
        except BaseException:
            os.close(self._fd)
            raise
        # Empty (a new cache) or unreadable: unknown, so counted afresh.
        self.total = int(text) if text.strip().isdigit() else None
        return self

    def write(self, total: int) -> None:
        data = b"%d\n" % total
        os.pwrite(self._fd, data, 0)
        os.ftruncate(self._fd, len(data))

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)  # releases the lock


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _runs(blocks: list[int]) -> list[tuple[int, int]]:
    """(first, last) of each run of consecutive numbers in sorted `blocks`."""
    runs: list[tuple[int, int]] = []
    for block in blocks:
        if runs and runs[-1][1] == block - 1:
            runs[-1] = (runs[-1][0], block)
        else:
            runs.append((block, block))
    return runs


# --- Settings -----------------------------------------------------------------

_CACHES: dict[tuple[str, int, int, bool], ReadCache] = {}
_CACHES_LOCK = threading.Lock()
_LIVE: "weakref.WeakSet[ReadCache]" = weakref.WeakSet()


def _after_fork() -> None:
    global _CACHES_LOCK
    _CACHES_LOCK = threading.Lock()
    for cache in list(_LIVE):
        cache.forget_open()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def check_cache_dir(value: object) -> str:
    """A cache folder option as a str: TypeError unless a str or PathLike,
    ValueError when empty or remote."""
    path = path_argument(value, "cache_dir")
    if is_remote(path):
        raise ValueError(f"cache_dir must be a local folder, not {path!r}")
    if not path:
        raise ValueError("cache_dir must not be empty")
    return path


def _max_bytes_from_environment(text: str) -> int:
    stripped = text.strip().upper().removesuffix("B").removesuffix("I")
    number, suffix = (stripped[:-1], stripped[-1]) if stripped[-1:] in _SUFFIXES else \
        (stripped, "")
    if not number.isdigit() or int(number) * _SUFFIXES[suffix] <= 0:
        raise ValueError(f"{ENV_MAX_BYTES} must be a number of bytes > 0 (e.g. 50000000000 "
                         f"or 50G), not {text!r}")
    return int(number) * _SUFFIXES[suffix]


def read_cache(cache_dir: str | None = None, max_bytes: int | None = None,
               shared: bool | None = None) -> ReadCache | None:
    """The cache of remote reads in `cache_dir` (default: $SACKLI_CACHE_DIR)
    within `max_bytes` (default: $SACKLI_CACHE_MAX_BYTES, else
    DEFAULT_MAX_BYTES), shared with other users or not (default:
    $SACKLI_SHARED_CACHE, else private); None (no cache) when neither names
    a folder. One `ReadCache` per folder, budget and sharing in a process.
    PermissionError for a private cache in a folder that is not the user's
    alone."""
    if cache_dir is None:
        cache_dir = os.environ.get(ENV_DIR) or None
        if cache_dir is None:
            return None
        try:
            check_cache_dir(cache_dir)
        except ValueError as error:
            raise ValueError(f"{ENV_DIR}: {error}") from None
    # Absolute when the reader opens (and `~` expanded): where it opens.
    cache_dir = os.path.abspath(os.path.expanduser(cache_dir))
    if max_bytes is None:
        text = os.environ.get(ENV_MAX_BYTES)
        max_bytes = _max_bytes_from_environment(text) if text else DEFAULT_MAX_BYTES
    if shared is None:
        shared = _cache_folder.shared_from_environment()
    slot = (cache_dir, max_bytes, BLOCK_BYTES, shared)
    with _CACHES_LOCK:
        cache = _CACHES.get(slot)
        if cache is None:
            try:
                cache = _CACHES[slot] = ReadCache(cache_dir, max_bytes, shared)
            except NotADirectoryError:
                raise  # says which
            except OSError as error:
                if error.errno in (errno.EEXIST, errno.ENOTDIR):
                    raise NotADirectoryError(
                        error.errno, f"cache_dir {cache_dir} is not a folder", cache_dir) from None
                raise
        return cache
