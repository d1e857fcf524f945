"""The local store: files on this machine's file systems, named by plain
paths. What the buckets' stores offer, for files: listings, sizes, ranged
and whole reads, atomic writes (a temporary name renamed into place, fsynced
when durable), deletions and existence.

The engine reads local bags itself (mmap or pread); this store serves the
small whole files beside them (schemas, specs, manifests, journals) and the
listings of folders.
"""

from __future__ import annotations

import contextlib
import errno
import os
import uuid
from typing import BinaryIO, Iterable, Iterator

from ._links import resolve_write_links
from ._store import ObjectStat

__all__ = ["LocalStore", "sync_folders"]


def sync_folders(paths: Iterable[str]) -> None:
    """fsyncs the folder of each local path (each folder once), so that the
    names renamed into them survive power loss; a file system that cannot
    sync a folder (EINVAL) is not an error."""
    for folder in dict.fromkeys(os.path.dirname(os.path.abspath(p)) for p in paths):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        except OSError as error:
            if error.errno not in (errno.EINVAL, errno.ENOTSUP):
                raise
        finally:
            os.close(fd)


class LocalStore:
    """Files by path. Errors are the operating system's (FileNotFoundError
    naming the path, PermissionError, ...)."""

    def stat(self, path: str) -> ObjectStat:
        """The file's size, identity (its modification time in ns and inode:
        what changes when it is replaced) and no metadata."""
        found = os.stat(path)
        return ObjectStat(found.st_size, f"{found.st_mtime_ns}:{found.st_ino}", {})

    def exists(self, path: str) -> bool:
        """Whether something (a file, a folder, a link, even a dangling one)
        has this name."""
        return os.path.lexists(path)

    def read(self, path: str, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length) of the file; OSError (EIO) when
        the file is shorter."""
        with open(path, "rb") as file:
            data = os.pread(file.fileno(), length, offset)
        if len(data) != length:
            raise OSError(errno.EIO, f"{path}: asked for {length} bytes at offset {offset}, "
                          f"got {len(data)}", path)
        return data

    def read_whole(self, path: str) -> bytes:
        """The file's bytes."""
        with open(path, "rb") as file:
            return file.read()

    def list(self, prefix: str) -> Iterator[tuple[str, int]]:
        """(path, size) of every file, in the folder of `prefix` and below,
        whose path starts with `prefix` (as an object listing does)."""
        folder = os.path.dirname(prefix)
        for root, folders, files in os.walk(folder or "."):
            # Paths as the prefix spells them: relative ones without "./".
            base = root if folder else os.path.relpath(root)

            def spelled(name: str) -> str:
                return name if base == "." else os.path.join(base, name)

            # Down only into the folders whose paths start with the prefix.
            folders[:] = sorted(name for name in folders if spelled(name).startswith(prefix))
            for name in sorted(files):
                path = spelled(name)
                if path.startswith(prefix):
                    try:
                        yield path, os.stat(path).st_size
                    except FileNotFoundError:
                        continue  # deleted while listed

    def write(self, path: str, data: bytes, *, durable: bool = False) -> None:
        """Writes `data` to `path` atomically (a reader sees the old file or
        the new one); see `writing`."""
        with self.writing(path, durable=durable) as file:
            file.write(data)

    @contextlib.contextmanager
    def writing(self, path: str, *, durable: bool = False, staged: str | None = None,
                buffering: int = -1) -> Iterator[BinaryIO]:
        """A binary file that becomes `path` atomically when the block ends
        without error (a reader sees the old file or the new one); on error
        nothing is left. FileNotFoundError when the folder is missing. A
        symbolic link is written through (the file it points to is
        replaced), except another user's in a sticky, world-writable folder
        (`resolve_write_links`). `durable`: the file is fsynced before the rename and its
        folder after. `staged`: the temporary name to write, on the same
        file system (in a partial folder of the caller's; replaced if a
        write cut short left it); by default a hidden unique name beside
        `path`. `buffering` as `open()`'s."""
        path = resolve_write_links(path)
        folder, name = os.path.split(path)
        # A hidden, unique temporary name (no glob of the bag set matches
        # it), created with the usual permissions (mkstemp's would be 0600).
        temp = staged or os.path.join(folder, f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            file = open(temp, "xb" if staged is None else "wb", buffering=buffering)
        except FileNotFoundError:
            raise FileNotFoundError(
                errno.ENOENT, f"{path}: the folder does not exist", path) from None
        try:
            with file:
                yield file
                if durable:
                    file.flush()
                    os.fsync(file.fileno())
            os.replace(temp, path)
            if durable:
                sync_folders([path])
        except BaseException:
            try:
                os.remove(temp)
            except FileNotFoundError:
                pass
            raise

    def delete(self, path: str) -> None:
        """Deletes the file; a missing one is not an error."""
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
