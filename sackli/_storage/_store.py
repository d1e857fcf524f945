"""What every remote back-end offers the engine and the writers."""

from __future__ import annotations

import errno
import functools
import re
from typing import Any, Callable, Iterator, NamedTuple, TypeVar

from ._executor import DEFAULT_PARALLELISM, in_parallel
from ._retry import Transient
from ._upload import Upload
from ._urls import RemotePath

__all__ = ["ListedObject", "ObjectStat", "ObjectTail", "Store", "UnfinishedUpload", "changed_error",
           "check_content_range",
           "check_identity", "read_each",
           "tail_size"]

T = TypeVar("T")

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(-?\d+)/(\d+)")


class ObjectStat(NamedTuple):
    """What a metadata request tells of an object."""

    size: int
    # What changes whenever the object is replaced: S3's ETag (as S3 quotes
    # it), GCS's generation (a decimal string).
    identity: str
    # The object's user metadata (S3's x-amz-meta-*, GCS's metadata).
    metadata: dict[str, str]


class ListedObject(NamedTuple):
    """An object as a listing shows it, with when it was last written."""

    url: str
    size: int
    # When the object was written (seconds since the epoch, by the server's
    # clock): S3's LastModified, GCS's updated.
    modified: float


class UnfinishedUpload(NamedTuple):
    """An upload started and neither completed nor aborted (an S3 multipart
    upload): its parts take space until it is aborted."""

    url: str
    upload_id: str
    # When it last moved: the newest of its start and its parts' uploads
    # (seconds since the epoch, by the server's clock).
    last_active: float
    # The bytes of its parts so far.
    size: int


class ObjectTail(NamedTuple):
    """What one suffix-ranged GET (`Range: bytes=-N`) tells of an object:
    its stat (size from the Content-Range's total, identity and metadata
    from the headers) and its last min(N, size) bytes."""

    stat: ObjectStat
    data: bytes | memoryview


def changed_error(url: str, opened: str, now: str | None) -> OSError:
    """The error for an object replaced since a reader opened it."""
    seen = f", now {now}" if now else ""
    return OSError(errno.ESTALE, f"{url}: the object changed since it was opened "
                   f"(it was {opened}{seen}): open it again to read the new one", url)


def check_identity(asked: str | None, answered: str | None, kind: str) -> None:
    """Raises `Transient` when an answer to a request conditional on `asked`
    (If-Match, ifGenerationMatch) names another version `answered`. A
    replaced object answers 412 to such a request, never other bytes, so
    the answer is another request's, on a connection out of step: asking
    again is right, and saying that the object changed would be wrong."""
    if asked and answered and answered != asked:
        raise Transient(f"asked for {kind} {asked}, got an answer of {kind} {answered}")


def check_content_range(header: str | None, offset: int, length: int, received: int) -> None:
    """Raises `Transient` unless a ranged answer is the range asked for:
    `Content-Range: bytes offset-(offset+length-1)/...` and `length` bytes.
    A replayed answer, a misbehaving cache or a desynchronised connection
    can bring another range of the same length; a new request may not."""
    expected = f"bytes {offset}-{offset + length - 1}/"
    if header is None:
        # Without a Content-Range only a whole object (a 200) can be right:
        # the bytes from 0, as many as asked for.
        if offset != 0 or received != length:
            raise Transient(f"asked for bytes {offset}-{offset + length - 1}, got an answer "
                            f"without Content-Range ({received} bytes)")
        return
    if not header.strip().startswith(expected):
        raise Transient(f"asked for {expected}..., got Content-Range {header!r}")
    if received != length:
        raise Transient(f"asked for {length} bytes at offset {offset}, got {received}")


def tail_size(header: str | None, length: int, received: int) -> int:
    """The object's size from the answer to `Range: bytes=-length`, checked
    to be its last min(length, size) bytes: `Content-Range: bytes
    a-(size-1)/size` with a = max(0, size - length), and that many bytes
    received. Raises `Transient` otherwise (another request's answer, a
    body cut short). Without a Content-Range only an empty object is
    believed (S3 answers a 200 for it): a server that ignores the Range
    sends the whole object, indistinguishable from a stale whole-object
    answer."""
    if header is None:
        if received != 0:
            raise Transient(f"asked for the last {length} bytes, got an answer without "
                            f"Content-Range ({received} bytes)")
        return 0
    match = _CONTENT_RANGE.fullmatch(header.strip())
    if match is None:
        raise Transient(f"asked for the last {length} bytes, got Content-Range {header!r}")
    first, last, size = (int(group) for group in match.groups())
    if size == 0 and received == 0:
        return 0  # "bytes 0--1/0": fake-gcs-server's answer for an empty object
    if first != max(0, size - length) or last != size - 1:
        raise Transient(f"asked for the last {length} bytes, got Content-Range {header!r}")
    if received != last - first + 1:
        raise Transient(f"asked for the last {last - first + 1} bytes, got {received}")
    return size


def read_each(read: Callable[[RemotePath, int, int, str | None], T], path: RemotePath,
              ranges: list[tuple[int, int]], identity: str | None, parallelism: int) -> list[T]:
    """`read(path, offset, length, identity)` of each range, in order, at
    most `parallelism` at once on the process's request threads
    (`in_parallel`): what every back-end's `read_many` does with its own
    single read."""
    return in_parallel([functools.partial(read, path, offset, length, identity)
                        for offset, length in ranges], parallelism)


class Store:
    """A back-end: sizes, ranged reads, listings, uploads (streamed with
    `open_upload`), server-side copies and deletions of objects.

    Subclasses raise FileNotFoundError / PermissionError (with the URL) for
    missing objects and refused credentials, and retry transient failures.
    """

    def reset(self) -> None:
        """Drops any cached client: the next request reads the configuration."""
        raise NotImplementedError

    def stat(self, path: RemotePath) -> ObjectStat:
        """The object's size, identity and metadata (FileNotFoundError when
        missing)."""
        raise NotImplementedError

    def read_tail(self, path: RemotePath, length: int) -> ObjectTail:
        """The object's stat and its last min(`length`, size) bytes, checked
        as `read` checks a range (FileNotFoundError when missing): what
        opening a remote bag needs (its trailer, its last limits). Here a
        `stat` and a `read` pinned to the identity seen; back-ends answer it
        with one suffix-ranged GET where they can (`tail_size`), and come
        back here where the server cannot (an empty object's 416)."""
        stat = self.stat(path)
        n = min(length, stat.size)
        return ObjectTail(stat, self.read(path, stat.size - n, n, stat.identity or None) if n else b"")

    def uploaded_identity(self, path: RemotePath, size: int, metadata: dict[str, str]) -> str | None:
        """The object's identity if it is an upload of `size` bytes with
        `metadata`, else None (missing, another object, or no answer): how a
        write whose answer was lost or doubtful is decided."""
        try:
            found = self.stat(path)
        except OSError:
            return None
        if found.size == size and all(found.metadata.get(key) == value for key, value in metadata.items()):
            return found.identity
        return None

    def size(self, path: RemotePath) -> int:
        """The object's size in bytes (FileNotFoundError when missing)."""
        return self.stat(path).size

    def exists(self, path: RemotePath) -> bool:
        """Whether the object exists."""
        try:
            self.size(path)
        except FileNotFoundError:
            return False
        return True

    def read(self, path: RemotePath, offset: int, length: int,
             identity: str | None = None) -> bytes:
        """Bytes [offset, offset + length) of the object, in one request,
        checked to be that range (`check_content_range`). With `identity`
        (from `stat`), only of that version of the object: OSError
        (`changed_error`) once it was replaced."""
        raise NotImplementedError

    def read_many(self, path: RemotePath, ranges: list[tuple[int, int]],
                  identity: str | None = None,
                  parallelism: int = DEFAULT_PARALLELISM) -> list[bytes | memoryview]:
        """The bytes of each (offset, length) range of the object, in order,
        each checked as `read` checks it, with at most `parallelism` requests
        in flight at once. When ranges fail, the error of the first failing
        one (by position) is raised, as `read` raised it (naming the URL).
        This default runs `read` for each range on the process-wide request
        threads (`read_each`); back-ends may fetch them their own way."""
        return read_each(self.read, path, ranges, identity, parallelism)

    def read_whole(self, path: RemotePath) -> bytes:
        """The whole object (FileNotFoundError when missing): here its size
        and then its bytes; back-ends that can, in one request."""
        size = self.size(path)
        return self.read(path, 0, size) if size else b""

    def list(self, path: RemotePath) -> Iterator[tuple[str, int]]:
        """(url, size) of every object whose key starts with `path.key`."""
        for url, stat in self.list_stats(path):
            yield url, stat.size

    def list_stats(self, path: RemotePath) -> Iterator[tuple[str, ObjectStat]]:
        """(url, stat) of every object whose key starts with `path.key`:
        size and identity as `stat` gives them, and the metadata the
        listing carries (GCS: the object's; S3 listings carry none: {})."""
        raise NotImplementedError

    def list_modified(self, path: RemotePath) -> Iterator[ListedObject]:
        """Every object whose key starts with `path.key`, with its size and
        when it was written."""
        raise NotImplementedError

    def unfinished_uploads(self, path: RemotePath) -> list[UnfinishedUpload]:
        """The unfinished uploads to keys starting with `path.key`. Here
        none: a store whose unfinished uploads cannot be listed (GCS's
        resumable sessions, which expire a week after they start) lists
        none."""
        return []

    def abort_upload(self, upload: UnfinishedUpload) -> None:
        """Aborts an unfinished upload (its parts are deleted); one gone
        already is not an error."""
        raise NotImplementedError

    def open_upload(self, path: RemotePath) -> Upload:
        """A stream that uploads the object as it is written, through the
        store's client."""
        raise NotImplementedError

    def put_file(self, path: RemotePath, file: Any, metadata: dict[str, str]) -> str:
        """Uploads a seekable binary file as the object, with user
        `metadata`; returns the new object's identity."""
        raise NotImplementedError

    def copy(self, source: RemotePath, target: RemotePath) -> None:
        """Copies an object on the server (no bytes pass through us);
        `target` appears whole. FileNotFoundError when `source` is missing."""
        raise NotImplementedError

    def delete(self, path: RemotePath) -> None:
        """Deletes the object; a missing object is not an error."""
        raise NotImplementedError
