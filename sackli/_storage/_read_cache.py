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
the lock every writer takes (`fcntl.flock`).

Guarantees:
- An entry is written under a temporary name in its folder and renamed into
  place while holding the lock: readers see a whole entry or none.
- Every entry carries a CRC-32 of each `CHUNK_BYTES` of its payload (and of
  its header, which names its key and block). Every byte served is checked
  against them when it is read, so a damaged or truncated file is dropped
  and fetched again, never served. No fsync: damage is detected instead.
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
"""

from __future__ import annotations

import collections
import errno
import fcntl
import hashlib
import os
import struct
import threading
import time
import warnings
import weakref
import zlib
from typing import Callable

from ._paths import path_argument
from ._urls import RemotePath, is_remote

__all__ = ["BLOCK_BYTES", "DEFAULT_MAX_BYTES", "ReadCache", "read_cache"]

# 1 MiB blocks: a ranged GET costs tens of milliseconds before its first
# byte, about what 1 MiB takes to arrive, so fetching the whole block for a
# small record at most doubles that request's cost, while a large read (the
# engine coalesces batches into runs of up to 8 MiB) fetches its blocks in
# one request. A 1 TB cache is a million files, some 4,000 per folder.
BLOCK_BYTES = 1 << 20
# Each CRC covers this much payload: a 1 KB record reads and checks at most
# two chunks (32 KiB), not its whole block.
CHUNK_BYTES = 16 << 10
# The budget when only a folder is given.
DEFAULT_MAX_BYTES = 10 << 30
# An eviction frees space down to this fraction of the budget, so that it
# runs once per tenth of the budget written, not on every insert.
LOW_WATER = 0.9
# Verified entries each process keeps open (an evicted one's blocks stay on
# disk until its descriptor closes: at most this many blocks per process).
OPEN_ENTRIES = 64
# A hit touches its entry (its recency, for eviction) at most this often.
TOUCH_SECONDS = 60.0

ENV_DIR = "SACKLI_CACHE_DIR"
ENV_MAX_BYTES = "SACKLI_CACHE_MAX_BYTES"

_VERSION_DIR = "v1"
_USAGE = "usage"
_TEMPORARY = ".tmp-"
_MAGIC = b"sackli\x00C"
_FORMAT = 1
# magic, format, chunk bytes, payload bytes, key digest, block, chunk count;
# then a u32 CRC per chunk, then a u32 CRC of all that.
_HEAD = struct.Struct("<8sIIQ32sQI")
_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _header_bytes(length: int) -> int:
    return _HEAD.size + 4 * _chunks(length) + 4


def _chunks(length: int) -> int:
    return -(-length // CHUNK_BYTES)


def _encode(digest: bytes, block: int, payload: memoryview) -> bytes:
    """The header of an entry holding `payload`."""
    crcs = [zlib.crc32(payload[i:i + CHUNK_BYTES]) for i in range(0, len(payload), CHUNK_BYTES)]
    head = _HEAD.pack(_MAGIC, _FORMAT, CHUNK_BYTES, len(payload), digest, block, len(crcs))
    head += struct.pack(f"<{len(crcs)}I", *crcs)
    return head + struct.pack("<I", zlib.crc32(head))


def _decode(header: bytes, digest: bytes, block: int, length: int) -> tuple[int, ...] | None:
    """The chunk CRCs of an entry whose header is `header`, or None unless
    it is the header of block `block` of `digest`, `length` bytes long."""
    if len(header) != _header_bytes(length):
        return None
    (crc,) = struct.unpack_from("<I", header, len(header) - 4)
    if zlib.crc32(memoryview(header)[:-4]) != crc:
        return None
    fields = _HEAD.unpack_from(header)
    if fields != (_MAGIC, _FORMAT, CHUNK_BYTES, length, digest, block, _chunks(length)):
        return None
    return struct.unpack_from(f"<{fields[-1]}I", header, _HEAD.size)


class _OpenEntry:
    """A verified entry's descriptor, shared by the threads reading it: it
    closes when it has left the open set and its last reader is done."""

    __slots__ = ("fd", "ino", "crcs", "length", "users", "retired", "touched")

    def __init__(self, fd: int, ino: tuple[int, int], crcs: tuple[int, ...], length: int) -> None:
        self.fd, self.ino, self.crcs, self.length = fd, ino, crcs, length
        self.users = 0
        self.retired = False
        self.touched = time.monotonic()

    def read(self, lo: int, hi: int) -> memoryview | None:
        """Payload bytes [lo, hi), every chunk they touch checked; None when
        a chunk is short or does not match its CRC."""
        first, last = lo // CHUNK_BYTES, (hi - 1) // CHUNK_BYTES
        start = first * CHUNK_BYTES
        wanted = min(self.length, (last + 1) * CHUNK_BYTES) - start
        data = memoryview(os.pread(self.fd, wanted, _header_bytes(self.length) + start))
        if len(data) != wanted:
            return None
        for chunk in range(first, last + 1):
            at = (chunk - first) * CHUNK_BYTES
            if zlib.crc32(data[at:at + CHUNK_BYTES]) != self.crcs[chunk]:
                return None
        return data[lo - start:hi - start]


class ReadCache:
    """One cache folder with its budget, as this process uses it (see the
    module doc). Thread-safe; `read_cache` shares one per folder and budget.

    Args:
      folder: the cache folder (created when missing).
      max_bytes: the budget: the bytes of every file in the cache.
    """

    def __init__(self, folder: str, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.block_bytes = BLOCK_BYTES
        self._root = os.path.join(folder, _VERSION_DIR)
        os.makedirs(self._root, exist_ok=True)
        self._lock = threading.Lock()
        self._open: collections.OrderedDict[tuple[bytes, int], _OpenEntry] = \
            collections.OrderedDict()
        # Blocks being fetched by a thread of this process (`_claim`).
        self._fetching: dict[tuple[bytes, int], threading.Event] = {}
        self._warned = False
        _LIVE.add(self)

    def __repr__(self) -> str:
        return f"ReadCache({self.folder!r}, max_bytes={self.max_bytes})"

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
             fetch: Callable[[int, int], bytes]) -> bytes:
        """Bytes [offset, offset + length) of the object keyed `key` (`size`
        bytes long): cached blocks from disk, the others with `fetch(offset,
        length)`, one call per contiguous run of missing blocks, kept. A
        block another thread of this process is fetching is waited for, not
        fetched twice."""
        if length <= 0:
            return b""
        step = self.block_bytes
        end = offset + length
        first, last = offset // step, (end - 1) // step

        def part(block: int, payload: bytes | memoryview) -> bytes | memoryview:
            # The part of block `block` (its `payload`) that the read wants.
            base = block * step
            return payload[max(offset, base) - base:min(end, base + step) - base]

        def cached(block: int) -> memoryview | None:
            base = block * step
            return self._cached(key, block, min(step, size - base),
                                 max(offset, base) - base, min(end, base + step) - base)

        pieces: list[bytes | memoryview | None] = [cached(block) for block in range(first, last + 1)]
        missing = [block for block, piece in zip(range(first, last + 1), pieces) if piece is None]
        mine, theirs = self._claim(key, missing)
        try:
            for run_first, run_last in _runs(mine):
                base = run_first * step
                data = memoryview(fetch(base, min(size, (run_last + 1) * step) - base))
                for block in range(run_first, run_last + 1):
                    at = block * step - base
                    payload = data[at:at + step]
                    self._publish(key, block, payload)
                    pieces[block - first] = part(block, payload)
        finally:
            self._settle(key, mine)
        for block, fetched in theirs:
            fetched.wait()
            piece = cached(block)
            if piece is None:  # that fetch failed, or its block was not kept
                base = block * step
                payload = memoryview(fetch(base, min(step, size - base)))
                self._publish(key, block, payload)
                piece = part(block, payload)
            pieces[block - first] = piece
        if len(pieces) == 1:
            return bytes(pieces[0])  # type: ignore[arg-type]
        return b"".join(pieces)  # type: ignore[arg-type]

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

    def _cached(self, key: bytes, block: int, length: int, lo: int, hi: int) -> memoryview | None:
        """Payload bytes [lo, hi) of a cached block, None when it is not
        cached (or was damaged: then it is dropped)."""
        entry = self._acquire(key, block, length)
        if entry is None:
            return None
        try:
            data = entry.read(lo, hi)
        except OSError:
            data = None
        finally:
            self._release(entry)
        if data is None:
            self._drop(key, block, entry)
        return data

    def _acquire(self, key: bytes, block: int, length: int) -> _OpenEntry | None:
        """The open entry of a block (its `users` raised), opened and its
        header verified if this process has not yet; None when absent."""
        slot = (key, block)
        with self._lock:
            entry = self._open.get(slot)
            if entry is not None:
                self._open.move_to_end(slot)
                entry.users += 1
        if entry is not None:
            if time.monotonic() - entry.touched > TOUCH_SECONDS:
                entry.touched = time.monotonic()
                _touch(entry.fd)
            return entry
        entry = self._open_entry(key, block, length)
        if entry is None:
            return None
        closing: list[_OpenEntry] = []
        with self._lock:
            known = self._open.get(slot)
            if known is not None:  # another thread opened it meanwhile
                closing.append(entry)
                entry = known
            else:
                self._open[slot] = entry
                while len(self._open) > OPEN_ENTRIES:
                    _, oldest = self._open.popitem(last=False)
                    oldest.retired = True
                    if oldest.users == 0:
                        closing.append(oldest)
            entry.users += 1
        for done in closing:
            os.close(done.fd)
        return entry

    def _release(self, entry: _OpenEntry) -> None:
        with self._lock:
            entry.users -= 1
            close = entry.retired and entry.users == 0
        if close:
            os.close(entry.fd)

    def _open_entry(self, key: bytes, block: int, length: int) -> _OpenEntry | None:
        path = self.entry_path(key, block)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        status = os.fstat(fd)
        ino = (status.st_dev, status.st_ino)
        head = _header_bytes(length)
        crcs = None
        if status.st_size == head + length:
            try:
                crcs = _decode(os.pread(fd, head, 0), key, block, length)
            except OSError:
                pass  # unreadable: dropped as damaged
        if crcs is None:
            os.close(fd)
            self._unlink_if(path, ino)
            return None
        _touch(fd)
        return _OpenEntry(fd, ino, crcs, length)

    def _drop(self, key: bytes, block: int, entry: _OpenEntry) -> None:
        """Forgets a damaged entry and deletes its file (unless another
        writer has already replaced it)."""
        close = False
        with self._lock:
            if self._open.get((key, block)) is entry:
                del self._open[(key, block)]
                entry.retired = True
                close = entry.users == 0
        if close:
            os.close(entry.fd)
        self._unlink_if(self.entry_path(key, block), entry.ino)

    def _unlink_if(self, path: str, ino: tuple[int, int]) -> None:
        """Deletes a damaged entry if `path` still is that file (`ino`);
        under the lock, so that a good entry published meanwhile stays."""
        try:
            with _Usage(self._root):
                status = os.stat(path)
                if (status.st_dev, status.st_ino) == ino:
                    os.unlink(path)
        except OSError:
            pass  # gone already, or the cache is unwritable: nothing to drop

    # --- Writing ----------------------------------------------------------

    def _publish(self, key: bytes, block: int, payload: memoryview) -> None:
        """Keeps a fetched block, within the budget. A cache that cannot be
        written (full disk, permissions) warns once: the reads are served
        all the same."""
        header = _encode(key, block, payload)
        size = len(header) + len(payload)
        if size > self.max_bytes:
            return
        path = self.entry_path(key, block)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with _Usage(self._root) as usage:
                if os.path.exists(path):
                    return  # another process published it meanwhile
                total = usage.total
                if total is None or total + size > self.max_bytes:
                    total = self._evict(size)
                usage.write(total + size)  # raised before the entry appears
                temporary = os.path.join(os.path.dirname(path),
                                         f"{_TEMPORARY}{os.getpid()}-{threading.get_ident()}")
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    _write_all(fd, header)
                    _write_all(fd, payload)
                finally:
                    os.close(fd)
                os.replace(temporary, path)
        except OSError as error:
            if not self._warned:
                self._warned = True
                warnings.warn(f"sackli read cache {self.folder}: cannot keep fetched bytes "
                              f"({error}); reads go on, served from the network", RuntimeWarning, stacklevel=2)

    def _evict(self, incoming: int) -> int:
        """Counts the cache (under the lock), deletes temporary files (none
        is being written: writers hold the lock) and, when `incoming` more
        bytes would exceed the budget, the least recently used entries down
        to LOW_WATER of it; returns the bytes left."""
        entries: list[tuple[int, int, str]] = []
        total = os.stat(os.path.join(self._root, _USAGE)).st_size  # counted too
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
        """Closes the entries this process keeps open (after a fork: the
        child's copies; its lock may have been held by another thread). The
        parent's fetches in flight are forgotten too: their threads are not
        in the child, so nothing would end them."""
        self._lock = threading.Lock()
        self._fetching = {}
        entries, self._open = list(self._open.values()), collections.OrderedDict()
        for entry in entries:
            try:
                os.close(entry.fd)
            except OSError:
                pass


class _Usage:
    """The cache's lock and byte count: `v1/usage`, held with `flock` (a
    fresh open each time, so that threads and forked processes exclude each
    other too)."""

    def __init__(self, root: str) -> None:
        self._path = os.path.join(root, _USAGE)
        self.total: int | None = None

    def __enter__(self) -> "_Usage":
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0),
                           0o644)
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


def _touch(fd: int) -> None:
    """Marks an entry used now (its mtime: eviction takes the oldest)."""
    try:
        os.utime(fd)
    except OSError:
        pass  # a read-only cache still serves


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

_CACHES: dict[tuple[str, int, int], ReadCache] = {}
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


def read_cache(cache_dir: str | None = None, max_bytes: int | None = None) -> ReadCache | None:
    """The cache of remote reads in `cache_dir` (default: $SACKLI_CACHE_DIR)
    within `max_bytes` (default: $SACKLI_CACHE_MAX_BYTES, else
    DEFAULT_MAX_BYTES); None (no cache) when neither names a folder. One
    `ReadCache` per folder and budget in a process."""
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
    slot = (cache_dir, max_bytes, BLOCK_BYTES)
    with _CACHES_LOCK:
        cache = _CACHES.get(slot)
        if cache is None:
            try:
                cache = _CACHES[slot] = ReadCache(cache_dir, max_bytes)
            except OSError as error:
                if error.errno in (errno.EEXIST, errno.ENOTDIR):
                    raise NotADirectoryError(
                        error.errno, f"cache_dir {cache_dir} is not a folder", cache_dir) from None
                raise
        return cache
