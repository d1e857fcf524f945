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

__all__ = ["exists", "read_bytes", "remove_quietly", "write_bytes"]


def read_bytes(path: str) -> bytes:
    """The file's bytes; FileNotFoundError naming `path` when missing."""
    if _storage.is_remote(path):
        return _storage.read_object(path)
    with open(path, "rb") as file:
        return file.read()


def write_bytes(path: str, data: bytes) -> None:
    """Writes `data` to `path` atomically (a reader sees the old file or the
    new one). FileNotFoundError when a local folder is missing."""
    if _storage.is_remote(path):
        _storage.write_object(path, data)
        return
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
        os.replace(temp, path)
    except BaseException:
        try:
            os.remove(temp)
        except FileNotFoundError:
            pass
        raise


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
