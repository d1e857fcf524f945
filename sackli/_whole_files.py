"""Small whole files beside bags (schema sidecars), and the deletion of any
file, wherever they live: local paths, or `gs://` / `s3://` URLs through
the storage layer. Writes are atomic everywhere: a local file is written
under a temporary name and renamed; an object appears when its upload is
committed."""

from __future__ import annotations

import errno
import os
import uuid
from typing import Iterable

from . import _storage

__all__ = ["exists", "read_bytes", "remove_quietly", "sync_folders", "write_bytes"]


def read_bytes(path: str) -> bytes:
    """The file's bytes; FileNotFoundError naming `path` when missing."""
    if _storage.is_remote(path):
        return _storage.read_object(path)
    with open(path, "rb") as file:
        return file.read()


def write_bytes(path: str, data: bytes, *, durable: bool = False) -> None:
    """Writes `data` to `path` atomically (a reader sees the old file or the
    new one). FileNotFoundError when a local folder is missing. A symbolic
    link is written through (the file it points to is replaced). `durable`:
    the file is fsynced before the rename and its folder after (an object
    is committed durably by its store anyway)."""
    if _storage.is_remote(path):
        _storage.write_object(path, data)
        return
    if os.path.islink(path):
        path = os.path.realpath(path)
    folder, name = os.path.split(path)
    # A hidden, unique temporary name (no glob of the bag set matches it),
    # created with the usual permissions (mkstemp's would be 0600).
    temp = os.path.join(folder, f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        file = open(temp, "xb")
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, f"{path}: the folder does not exist", path) from None
    try:
        with file:
            file.write(data)
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


def sync_folders(paths: Iterable[str]) -> None:
    """fsyncs the folder of each local path (each folder once), so that the
    names renamed into them survive power loss. Remote paths are skipped;
    a file system that cannot sync a folder (EINVAL) is not an error."""
    for folder in dict.fromkeys(os.path.dirname(os.path.abspath(p))
                                for p in paths if not _storage.is_remote(p)):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        except OSError as error:
            if error.errno not in (errno.EINVAL, errno.ENOTSUP):
                raise
        finally:
            os.close(fd)


def exists(path: str) -> bool:
    """Whether the file (or object) exists."""
    if _storage.is_remote(path):
        return _storage.object_exists(path)
    return os.path.exists(path)


def remove_quietly(paths: Iterable[str]) -> None:
    """Deletes the files (or objects) that exist, ignoring those that do not."""
    for path in paths:
        if _storage.is_remote(path):
            _storage.delete_object(path)
            continue
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
